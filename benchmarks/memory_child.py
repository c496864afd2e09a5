"""Child for the RSS benchmark (area 5); always a fresh process.

    python benchmarks/memory_child.py N WORKSPACE_ROOT

RSS (VmRSS from /proc/self/status) after `import wasm_kernel`, after each of N
sandboxes is created (idle), and after each one ran `import numpy, pandas`; plus each
guest's linear-memory size. Prints one JSON line. (The native side is a `python -c`
in bench_memory.py, so it imports nothing extra.)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import rss_kib  # noqa: E402

SETTLE = 0.5  # lets each guest's after-cell checkpoint finish before RSS is read


def guest(n: int, root: Path) -> dict:
    from wasm_kernel import create_sandbox

    out: dict = {"after_import": rss_kib(), "idle": [], "numpy": [], "guest_mem_idle": [], "guest_mem_numpy": []}
    sbs = []
    for i in range(n):
        sb = create_sandbox(workspace=root / f"ws{i}")
        r = sb.execute("1+1")
        time.sleep(SETTLE)
        sbs.append(sb)
        out["idle"].append(rss_kib())
        out["guest_mem_idle"].append(r.memory_used_bytes)
    for sb in sbs:
        r = sb.execute("import numpy, pandas")
        if not r.success:
            raise RuntimeError(f"import numpy, pandas failed: {r.error}")
        time.sleep(SETTLE)
        out["numpy"].append(rss_kib())
        out["guest_mem_numpy"].append(r.memory_used_bytes)
    for sb in sbs:
        sb.close()
    return out


if __name__ == "__main__":
    print(json.dumps(guest(int(sys.argv[1]), Path(sys.argv[2]))))
