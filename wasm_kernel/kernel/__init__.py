"""The Jupyter layer: the kernel, its magics and displays. Imports every layer below."""
