"""kill -9 of a warm-image build, at random moments: the kill -9 suite's check that a
build interrupted half way never leaves an image that a sandbox would use, and that
the next build sweeps its leftovers and succeeds. Run through run_all.py's kill9 area
(its image rounds) and tests/e2e/test_kill9_fuzz.py (a short form)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# A small image of its own, so the rounds never touch the default one.
PRELOAD = ("json", "csv", "decimal")
_BUILD = ("import sys; from wasm_kernel.runtime.provisioning import prepare_warm_image; "
          "prepare_warm_image(tuple(sys.argv[1:])); print('built', flush=True)")


def run_image_kills(rounds: int, seed: int, progress: bool = True) -> dict[str, Any]:
    from wasm_kernel import create_sandbox
    from wasm_kernel.core.sandbox import GuestOptions
    from wasm_kernel.host.memory_image import load_image
    from wasm_kernel.runtime import warm_image
    from wasm_kernel.runtime.provisioning import prepare_warm_image, warm_image_key

    rng = random.Random(seed)
    key = warm_image_key(PRELOAD)
    folder = warm_image.image_folder(key)
    result: dict[str, Any] = {"rounds": rounds, "seed": seed, "kills": 0, "completed": 0, "failure": None}
    # How long a whole build takes here (the quicker of two: the first reads cold
    # files), so the kills land all through one.
    times = []
    for _ in range(2):
        shutil.rmtree(folder, ignore_errors=True)
        start = time.monotonic()
        subprocess.run([sys.executable, "-c", _BUILD, *PRELOAD], check=True, capture_output=True, timeout=300)
        times.append(time.monotonic() - start)
    build_s = min(times)
    result["build_s"] = round(build_s, 2)
    for n in range(rounds):
        shutil.rmtree(folder, ignore_errors=True)  # each round builds from nothing
        child = subprocess.Popen([sys.executable, "-c", _BUILD, *PRELOAD], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(rng.uniform(0.0, build_s * 0.95))
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            result["kills"] += 1
        else:
            result["completed"] += 1
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
        image = load_image(folder, key)
        if folder.exists() and image is None:
            result["failure"] = f"round {n}: a folder that is not a whole image was left at {folder}"
            break
        if progress:
            print(f"image kill round {n + 1}/{rounds}: {'killed' if child.returncode else 'completed'}", flush=True)
    if result["failure"] is None:
        warm_image._memo.pop(key, None)
        warm_image._failed.pop(key, None)
        image = prepare_warm_image(PRELOAD)  # sweeps what the kills left, builds if needed
        left = [p.name for p in folder.parent.glob(f".*-{folder.name}-*")]
        if left:
            result["failure"] = f"leftovers after the next build: {left}"
        else:
            with tempfile.TemporaryDirectory() as ws:
                sb = create_sandbox(workspace=Path(ws), guest_options=GuestOptions(preload=PRELOAD))
                try:
                    r = sb.execute("import sys\nprint('decimal' in sys.modules, 1 + 1)")
                    if not sb.started_from_image or r.stdout != "True 2\n":
                        result["failure"] = f"the rebuilt image did not serve a sandbox: {r.stdout!r} {sb.boot_notice}"
                finally:
                    sb.close()
        result["image_bytes"] = image.size
    return result
