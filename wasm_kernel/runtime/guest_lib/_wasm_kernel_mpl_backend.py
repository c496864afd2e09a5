"""matplotlib backend for the sandbox: Agg rendering, and `plt.show()` displays
every open figure as PNG in the cell's output, like IPython's inline backend."""

from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def show(*args, block=None, **kwargs):
    from _wasm_kernel_guest import show_figures

    show_figures(close=True)
