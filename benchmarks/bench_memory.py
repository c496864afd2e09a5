"""Area 5: host RSS per sandbox, idle and with numpy+pandas imported.

Guest: one fresh child process (memory_child.py) creates N sandboxes, reading VmRSS
after each; then runs `import numpy, pandas` in each, reading VmRSS after each.
The first sandbox also maps the compiled guest code and the engine (shared by all
later sandboxes), so the per-sandbox figure is the marginal one:
(RSS with N sandboxes - RSS with 1) / (N - 1). The first sandbox's own delta is
kept in `extra`.
Native: a fresh `python -c` reading its own VmRSS bare, then after importing
numpy and pandas: what one isolated native interpreter costs.
"""

from __future__ import annotations

import sys

from _common import HERE, Row, log, median, run_child_json, temp_workspace

NATIVE = r"""
import json
def rss():
    d = {}
    for path, keys in (('/proc/self/status', ('VmRSS', 'RssAnon', 'RssFile')),
                       ('/proc/self/smaps_rollup', ('Pss', 'Pss_Anon', 'Pss_File'))):
        for line in open(path):
            k, _, v = line.partition(':')
            if k in keys:
                d[k] = int(v.split()[0])
    return d
out = {'bare': rss()}
import numpy, pandas
out['numpy'] = rss()
print(json.dumps(out))
"""


def run_memory(n: int = 4) -> list[Row]:
    log(f"memory: {n} sandboxes in a fresh process")
    with temp_workspace() as root:
        g = run_child_json([sys.executable, str(HERE / "memory_child.py"), str(n), str(root)])
    nat = [run_child_json([sys.executable, "-c", NATIVE]) for _ in range(3)]
    mib = 1 / 1024
    idle = [s["VmRSS"] for s in g["idle"]]
    loaded = [s["VmRSS"] for s in g["numpy"]]
    base = g["after_import"]["VmRSS"]
    per_idle = (idle[-1] - idle[0]) / (n - 1) * mib
    first_idle = (idle[0] - base) * mib
    # numpy: each step adds numpy+pandas to one more sandbox
    steps = [loaded[0] - idle[-1]] + [loaded[i] - loaded[i - 1] for i in range(1, n)]
    per_numpy_added = median(steps) * mib
    per_numpy_total = per_idle + per_numpy_added
    bare = median([x["bare"]["VmRSS"] for x in nat]) * mib
    nat_np = median([x["numpy"]["VmRSS"] for x in nat]) * mib
    def per(key: str, stage: str = "idle") -> float:
        xs = g[stage]
        return (xs[-1].get(key, 0) - xs[0].get(key, 0)) / (n - 1) * mib

    extra = {
        "rss_after_import_mib": base * mib,
        "rss_idle_mib": [x * mib for x in idle],
        "rss_numpy_mib": [x * mib for x in loaded],
        "first_sandbox_delta_mib": first_idle,
        "per_sandbox_idle_pss_mib": per("Pss"),
        "per_sandbox_numpy_step_pss_mib": per("Pss", "numpy"),
        "per_sandbox_idle_rss_anon_mib": per("RssAnon"),
        "per_sandbox_idle_rss_file_mib": per("RssFile"),
        "per_sandbox_idle_rss_shmem_mib": per("RssShmem"),
        "per_numpy_step_rss_anon_mib": per("RssAnon", "numpy"),
        "per_numpy_step_rss_shmem_mib": per("RssShmem", "numpy"),
        "guest_linear_memory_idle_mib": [x / 2**20 for x in g["guest_mem_idle"]],
        "guest_linear_memory_numpy_mib": [x / 2**20 for x in g["guest_mem_numpy"]],
        "numpy_import_steps_mib": [x * mib for x in steps],
        "native_samples": nat,
    }
    native_pss = median([x["bare"].get("Pss", 0) for x in nat]) * mib
    native_np_pss = median([x["numpy"].get("Pss", 0) for x in nat]) * mib
    return [
        Row("memory", "RSS per idle sandbox (marginal)", "MiB", per_idle, bare,
            note="native = RSS of a bare python process", extra=extra),
        Row("memory", "RSS of the first sandbox (incl. shared code)", "MiB", first_idle, bare,
            note="native = bare python process"),
        Row("memory", "RSS per sandbox with numpy+pandas", "MiB", per_numpy_total, nat_np,
            note="native = python process after import numpy, pandas"),
        Row("memory", "PSS per idle sandbox (marginal)", "MiB", per("Pss"), native_pss or None,
            note="informative: shared pages counted once; native = PSS of a bare python"),
        Row("memory", "PSS per sandbox with numpy+pandas", "MiB", per("Pss") + per("Pss", "numpy"),
            native_np_pss or None, note="informative; native = PSS after import numpy, pandas"),
    ]
