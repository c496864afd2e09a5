"""Shell commands: `!ls` and `!cat` in wasm-python's confined shell against
ipykernel's real shell (bash on a pseudo-terminal), side by side in one run.

    .venv/bin/python benchmarks/run_all.py --only shell [--rounds 5] [--json out.json]

Both kernels start in the same notebook folder, which holds a folder of 10,000 empty
files and a 10 MB text file (100,000 lines). Per round, each kernel in turn (the
order alternates) runs, after a warm-up cell:
1. `!ls many`: request to status idle, every stream message received (the output is
   checked: 10,000 names);
2. `!cat big.txt`: the same (the text is checked: 10 MB, with the terminal's \\r\\n);
3. `n = !wc -l big.txt`: a captured command, request to idle.
wasm-python reads the folder through the notebook-folder layer (read-only), as a
notebook's data is read; its stdout cap is raised to 64 MiB for the run so the whole
file reaches the client, as it does on ipykernel, and notebook_files_max to 20,000
(a folder of more visible files is not shown by default).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row  # noqa: E402
from bench_kernel import DrivenKernel, alternating_rounds, kernel_env, paired_rows  # noqa: E402

AREA = "shell"
FILES = 10_000
LINES = 100_000
LINE = "a line of the big text file, 100 bytes long, for the cat benchmark ".ljust(99, ".") + "\n"


def make_folder(folder: Path) -> None:
    many = folder / "many"
    many.mkdir(parents=True)
    for i in range(FILES):
        (many / f"file_{i:05d}.csv").touch()
    assert len(LINE) == 100
    (folder / "big.txt").write_text(LINE * LINES)


def _text(outputs: list[dict[str, Any]]) -> str:
    return "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")


def one_round(kernel: str, env: dict[str, str], folder: Path, scratch: Path) -> dict[str, Any]:
    k = DrivenKernel(kernel, env, folder, scratch / f"{kernel}.log")
    try:
        k.start()
        k.run_cell("!echo warm")
        ls = k.run_cell("!ls many")
        names = _text(ls["outputs"]).split()
        assert len(names) == FILES, (kernel, len(names), _text(ls["outputs"])[:300])
        cat = k.run_cell("!cat big.txt", timeout=600)
        text = _text(cat["outputs"])
        assert len(text) == LINES * (len(LINE) + 1), (kernel, len(text))  # each \n a terminal's \r\n
        wc = k.run_cell("n = !wc -l big.txt\nassert n[0].split()[0] == '100000', n")
        return {"ls_s": ls["idle_s"], "ls_messages": len(ls["outputs"]), "cat_s": cat["idle_s"],
                "cat_messages": len(cat["outputs"]), "wc_s": wc["idle_s"]}
    finally:
        k.shutdown()


def run_shell(rounds: int = 5) -> tuple[list[Row], dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="wk-bench-shell-"))
    folder = base / "notebook"
    make_folder(folder)
    common = kernel_env(base)
    common["SHELL"] = "/bin/bash"  # IPython runs `!` lines with $SHELL; bash is the usual one
    raw: dict[str, Any] = {"rounds": [], "files": FILES, "bytes": LINES * len(LINE)}
    try:
        # The whole file reaches the client, as on ipykernel; and a notebook folder of
        # more than notebook_files_max (10,000) visible files is not shown.
        raw["rounds"] = alternating_rounds(
            AREA, rounds, base, common, lambda kernel, env, scratch: one_round(kernel, env, folder, scratch),
            lambda got: f"ls {got['ls_s']:.3f} s cat {got['cat_s']:.3f} s",
            wasm_config="c.WasmKernel.stdout_max_bytes = 64 * 1024 * 1024\nc.WasmKernel.notebook_files_max = 20_000\n")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows_from(raw), raw


def rows_from(raw: dict[str, Any]) -> list[Row]:
    return paired_rows(AREA, raw, [("ls_s", f"`!ls` of {FILES:,} files, request -> idle"),
                                   ("cat_s", f"`!cat` of a {raw['bytes'] >> 20} MB file, request -> idle"),
                                   ("wc_s", "`n = !wc -l` of the same file, request -> idle")],
                       "native: bash on a pty (ipykernel)")


if __name__ == "__main__":
    from _common import print_table

    rows, _ = run_shell(int(os.environ.get("ROUNDS", "3")))  # a quick look; run_all.py is the way
    print_table(rows)
