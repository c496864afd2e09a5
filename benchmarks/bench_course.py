"""A course's environment (c.WasmKernel.guest_requirements): what building it costs on
an empty cache, and what a kernel's start costs with its modules preloaded against
without, side by side in one run.

    .venv/bin/python benchmarks/bench_course.py [--rounds 3] [--json out.json]
        [--requirement datascience==0.18.1 --requirement otter-grader==7.0.0] [--override wrapt>=1.16]

Everything runs on a wasm-kernel cache of its own (the compiled modules hard-linked
from the user's, so nothing is compiled): the build is timed from nothing, pip
resolving and downloading from the configured index (PyPI: network), then the warm
image with the course. Each round then starts, in alternating order, a kernel with
the course and the default preload and one with the course's modules preloaded too,
and times from start_kernel() to the reply of the notebook's first cell,
`import otter` and `from datascience import *` (the course's modules imported, as a
lab's first cell does), and to the reply of `1+1` before it (the kernel is up).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _first_cells(argv: list[str], env: dict[str, str], cwd: Path, first: str) -> tuple[float, float]:
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name="wasm-python")
    began = time.perf_counter()
    km.start_kernel(env=env, extra_arguments=argv, cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=300)
        reply = kc.execute_interactive("1+1", timeout=300)
        up = time.perf_counter() - began
        assert reply["content"]["status"] == "ok", reply["content"]
        reply = kc.execute_interactive(first, timeout=300)
        done = time.perf_counter() - began
        assert reply["content"]["status"] == "ok", reply["content"]
        return up, done
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirement", action="append", default=None)
    parser.add_argument("--override", action="append", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    requirements = args.requirement or ["datascience==0.18.1", "otter-grader==7.0.0"]
    overrides = args.override or ["wrapt>=1.16"]

    from support.private_cache import make_private_cache

    scratch = Path(tempfile.mkdtemp(prefix="bench-course-"))
    try:
        cache = make_private_cache(scratch / "cache")
        os.environ["WASM_KERNEL_CACHE_DIR"] = str(cache)
        from wasm_kernel.runtime.course_mount import set_course_mount
        from wasm_kernel.runtime.provisioning import prepare_warm_image
        from wasm_kernel.runtime.warm_image import DEFAULT_PRELOAD
        from wasm_kernel.sessions.course_site import course_request, course_site
        from wasm_kernel.sessions.pip_runner import PipSettings

        request = course_request(requirements, "", PipSettings(overrides=tuple(overrides)))
        assert request is not None
        _log(f"building the course's environment for {requirements} on an empty cache ...")
        t = time.perf_counter()
        site = course_site(request)
        build_s = time.perf_counter() - t
        size = sum(f.stat().st_size for f in site.path.rglob("*") if f.is_file())
        set_course_mount(site.mount)
        t = time.perf_counter()
        prepare_warm_image(DEFAULT_PRELOAD)
        image_s = time.perf_counter() - t
        _log(f"built: {len(site.distributions)} distributions, {size / 2**20:.1f} MiB, {build_s:.1f} s; "
             f"warm image with it {image_s:.1f} s")

        modules = ["otter", "datascience"]
        base = [f"--WasmKernel.guest_requirements={json.dumps(requirements)}",
                f"--WasmKernel.guest_overrides={json.dumps(overrides)}"]
        configs = {
            "course": base,
            "course preloaded": base + [f"--WasmKernel.preload_modules={json.dumps([*DEFAULT_PRELOAD, *modules])}"],
        }
        first = "import otter\nfrom datascience import *"
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
        for round_ in range(args.rounds + 1):  # round 0 builds the preloaded image and warms the file cache
            order = list(configs) if round_ % 2 == 0 else list(reversed(configs))
            for name in order:
                folder = scratch / f"r{round_}-{name.replace(' ', '-')}"
                (folder / "nb").mkdir(parents=True)
                env = {**os.environ, "JUPYTER_DATA_DIR": str(folder / "data"), "IPYTHONDIR": str(folder / "ipython")}
                env.pop("JPY_SESSION_NAME", None)
                measured = _first_cells(configs[name], env, folder / "nb", first)
                if round_:
                    times[name].append(measured)
                _log(f"round {round_} {name}: up {measured[0]:.2f} s, first cell done {measured[1]:.2f} s")
        result = {
            "requirements": requirements, "overrides": overrides, "distributions": len(site.distributions),
            "site_mib": round(size / 2**20, 1), "build_s": round(build_s, 1), "image_s": round(image_s, 1),
            "rounds": args.rounds,
        }
        for name, samples in times.items():
            result[name] = {"up_median_s": round(statistics.median(s[0] for s in samples), 3),
                            "first_cell_median_s": round(statistics.median(s[1] for s in samples), 3)}
        result["first_cell_ratio_preloaded_vs_not"] = round(
            result["course preloaded"]["first_cell_median_s"] / result["course"]["first_cell_median_s"], 2)
        print(json.dumps(result, indent=2))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
        return 0
    finally:
        for dirpath, _dirs, _files in os.walk(scratch):
            os.chmod(dirpath, 0o755)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
