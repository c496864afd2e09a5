"""IPython.display for the wasm-kernel sandbox: the classes notebooks use most,
with IPython's constructor signatures and `_repr_*_` methods."""

import base64
import json as _json
import os

from _wasm_kernel_guest import DisplayHandle, clear_output, display, update_display

__all__ = [
    "display", "update_display", "clear_output", "DisplayHandle", "DisplayObject",
    "TextDisplayObject", "Pretty", "HTML", "Markdown", "Math", "Latex", "SVG", "JSON",
    "Javascript", "Image", "Code", "ProgressBar", "display_html", "display_markdown",
    "display_png", "display_jpeg", "display_svg", "display_latex", "display_json",
    "display_pretty", "display_javascript",
]


class DisplayObject:
    """Data to show, given directly, from a file in the workspace, or as a URL."""

    _read_flags = "r"

    def __init__(self, data=None, url=None, filename=None, metadata=None):
        if data is not None and isinstance(data, str):
            if data.startswith(("http://", "https://")) and url is None:
                url, data = data, None
            elif filename is None and len(data) < 4096 and "\n" not in data and os.path.isfile(data):
                filename, data = data, None
        self.data = data
        self.url = url
        self.filename = filename
        self.metadata = dict(metadata or {})
        self.reload()
        self._check_data()

    def _check_data(self):
        pass

    def reload(self):
        if self.filename is not None:
            with open(self.filename, self._read_flags) as f:
                self.data = f.read()

    def _data_and_metadata(self):
        return (self.data, self.metadata) if self.metadata else self.data

    def __repr__(self):
        return f"<{type(self).__module__}.{type(self).__name__} object>"


class TextDisplayObject(DisplayObject):
    def _check_data(self):
        if self.data is not None and not isinstance(self.data, str):
            raise TypeError(f"{type(self).__name__} expects text, got {type(self.data).__name__}")


class Pretty(TextDisplayObject):
    def _repr_pretty_(self, p, cycle):
        return self.data

    def __repr__(self):
        return self.data or ""


class HTML(TextDisplayObject):
    def _repr_html_(self):
        return self._data_and_metadata()

    def __html__(self):
        return self.data


class Markdown(TextDisplayObject):
    def _repr_markdown_(self):
        return self._data_and_metadata()


class Math(TextDisplayObject):
    def _repr_latex_(self):
        s = (self.data or "").strip("$")
        return f"$\\displaystyle {s}$"


class Latex(TextDisplayObject):
    def _repr_latex_(self):
        return self._data_and_metadata()


class SVG(DisplayObject):
    _read_flags = "rb"

    def _check_data(self):
        if isinstance(self.data, bytes):
            self.data = self.data.decode("utf-8", "replace")

    def _repr_svg_(self):
        return self._data_and_metadata()


class Code(TextDisplayObject):
    def __init__(self, data=None, url=None, filename=None, language=None):
        self.language = language
        super().__init__(data=data, url=url, filename=filename)

    def _repr_html_(self):
        import html

        return f"<pre><code>{html.escape(self.data or '')}</code></pre>"

    def _repr_markdown_(self):
        return f"```{self.language or ''}\n{self.data}\n```"

    def __repr__(self):
        return self.data or ""


class JSON(DisplayObject):
    def __init__(self, data=None, url=None, filename=None, expanded=False, metadata=None, root="root", **kwargs):
        self.expanded = expanded
        self.root = root
        self.metadata = {"expanded": expanded, "root": root}
        if metadata:
            self.metadata.update(metadata)
        if kwargs:
            self.metadata.update(kwargs)
        super().__init__(data=data, url=url, filename=filename, metadata=self.metadata)

    def _check_data(self):
        if isinstance(self.data, str):
            self.data = _json.loads(self.data)

    def _repr_json_(self):
        return self.data, self.metadata


class Javascript(TextDisplayObject):
    def __init__(self, data=None, url=None, filename=None, lib=None, css=None):
        super().__init__(data=data, url=url, filename=filename)

    def _repr_javascript_(self):
        return self.data


_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8"


class Image(DisplayObject):
    _read_flags = "rb"

    def __init__(self, data=None, url=None, filename=None, format=None, embed=None, width=None,
                 height=None, retina=False, unconfined=False, metadata=None, alt=None):
        if filename is None and url is None and isinstance(data, str) and not data.startswith("http"):
            filename, data = data, None
        if format is None:
            name = (filename or url or "").lower()
            if name.endswith((".jpg", ".jpeg")):
                format = "jpeg"
            elif name.endswith(".svg"):
                format = "svg"
            elif name.endswith(".png"):
                format = "png"
            elif isinstance(data, bytes):
                format = "jpeg" if data.startswith(_JPEG) else "png"
        self.format = (format or "png").lower().replace("jpg", "jpeg")
        self.embed = embed if embed is not None else url is None
        self.width, self.height, self.alt = width, height, alt
        md = dict(metadata or {})
        if width:
            md["width"] = width
        if height:
            md["height"] = height
        if alt:
            md["alt"] = alt
        super().__init__(data=data, url=url, filename=filename, metadata=md)

    def _repr_png_(self):
        if self.embed and self.format == "png":
            return (self.data, self.metadata) if self.metadata else self.data
        return None

    def _repr_jpeg_(self):
        if self.embed and self.format == "jpeg":
            return (self.data, self.metadata) if self.metadata else self.data
        return None

    def _repr_html_(self):
        if not self.embed:
            return f'<img src="{self.url}"/>'
        return None


class ProgressBar:
    def __init__(self, total):
        self.total, self._progress, self.html_width = total, 0, "60ex"
        self._handle = None

    def _repr_html_(self):
        return f"<progress style='width:{self.html_width}' max='{self.total}' value='{self.progress}'></progress>"

    def __repr__(self):
        return f"{self.progress}/{self.total}"

    def display(self):
        self._handle = display(self, display_id=True)

    def update(self):
        if self._handle is None:
            self.display()
        else:
            self._handle.update(self)

    @property
    def progress(self):
        return self._progress

    @progress.setter
    def progress(self, value):
        self._progress = value
        self.update()

    def __iter__(self):
        self.display()
        self._progress = -1
        return self

    def __next__(self):
        self.progress += 1
        if self.progress < self.total:
            return self.progress
        raise StopIteration


def _display_raw(mime):
    def show(*objs, raw=False, metadata=None):
        for obj in objs:
            if raw:
                display({mime: obj}, raw=True, metadata=metadata)
            else:
                display(obj, include=[mime], metadata=metadata)

    return show


display_html = _display_raw("text/html")
display_markdown = _display_raw("text/markdown")
display_png = _display_raw("image/png")
display_jpeg = _display_raw("image/jpeg")
display_svg = _display_raw("image/svg+xml")
display_latex = _display_raw("text/latex")
display_json = _display_raw("application/json")
display_pretty = _display_raw("text/plain")
display_javascript = _display_raw("application/javascript")
