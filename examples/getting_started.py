# A tour of the sandbox, run cell by cell with `wasm-kernel run examples/getting_started.py`.
# Cells are separated by "# %%" lines, as in VS Code and Jupytext.
import sys
print("Python", sys.version.split()[0], "on", sys.platform)
# %%
# Variables persist from cell to cell; the last expression is shown.
answer = 6 * 7
answer
# %%
# The workspace is mounted at /app; nothing else of the host is visible.
import os
with open("hello.txt", "w") as f:
    f.write("written inside the sandbox\n")
print(os.getcwd(), sorted(os.listdir(".")))
try:
    open("/etc/passwd")
except OSError as err:
    print("host files are invisible:", type(err).__name__)
# %%
import numpy as np
import pandas as pd
df = pd.DataFrame({"x": np.arange(5), "y": np.arange(5) ** 2})
df
# %%
import matplotlib.pyplot as plt
plt.plot(df.x, df.y, marker="o")
plt.title("y = x²")
# %%
# An infinite loop is stopped by the per-cell deadline; earlier state survives.
while True:
    pass
# %%
print("still here:", answer)
