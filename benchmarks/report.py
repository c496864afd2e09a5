"""Markdown tables from run_all.py JSON files (used to write BENCHMARKS.md).

    .venv/bin/python benchmarks/run_all.py --report RUN.json [RERUN.json ...]

Prints the rows of the first run as a Markdown table; with more runs, one more
column per run with that run's guest figure and ratio, and the change of the
guest figure against the first run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt, fmt_ratio  # noqa: E402


def report(paths: list[str]) -> None:
    runs = [json.loads(Path(p).read_text()) for p in paths]
    first, rest = runs[0], runs[1:]
    others = [{(r["area"], r["name"]): r for r in run["rows"]} for run in rest]
    head = ["area", "figure", "unit", "guest", "native", "ratio", "target", "met?"]
    head += [f"rerun {i + 1}: guest (ratio, change)" for i in range(len(rest))]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in first["rows"]:
        cells = [r["area"], r["name"], r["unit"], fmt(r["guest"]), fmt(r["native"]), fmt_ratio(r["ratio"]),
                 r["target"].replace("<=", "≤"), {"PASS": "yes", "FAIL": "**no**"}.get(r["status"], "")]
        for o in others:
            s = o.get((r["area"], r["name"]))
            if s is None or s["guest"] is None:
                cells.append("-")
                continue
            change = f", {(s['guest'] / r['guest'] - 1) * 100:+.0f}%" if r["guest"] else ""
            mark = {"PASS": " ✓", "FAIL": " ✗"}.get(s["status"], "")
            cells.append(f"{fmt(s['guest'])} ({fmt_ratio(s['ratio'])}{change}){mark}")
        print("| " + " | ".join(cells) + " |")
