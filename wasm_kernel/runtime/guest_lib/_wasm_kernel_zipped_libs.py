"""IPython meets libraries that ship as bytecode in a zip: the guest's stdlib and its
built-in packages (numpy, pandas...) live in python315.zip, without source.

Two of IPython's features assume source files in folders: tracebacks, which would
show each such frame as a bare `File ...python315.zip/...` line with no code, and
the completion of `import nu<Tab>`, which walks sys.path folders only. install()
adapts both, once, as the shell is built.

A refusal of the sandbox's (an exception _wasm_kernel_refusals.refused() marked: no
network, no subprocess) folds every library frame, with source or without: the
cell's line and the one-line message are all it needs to say, where requests'
frames alone would take 40 lines.
"""

import linecache
import zipfile

# Where the guest's own libraries live (the stdlib zip holds numpy, pandas... too).
LIBRARY_ROOTS = ("/usr/local/lib/",)


def install():
    _collapse_library_frames()
    _complete_modules_in_zips()


REFUSAL_MARK = "_wasm_kernel_refusal"  # the attribute refused() sets on an exception


class _LibraryFrame(str):
    """A frame format_record left out: library code, shipped without source unless
    `with_source` (a refusal's frames, folded whatever they have)."""

    with_source = False


def _collapse_library_frames():
    """Tracebacks as ipykernel's read, where library frames show their source: a run
    of frames without source becomes one line; `%xmode Verbose` lists them all."""
    from IPython.core import ultratb
    from IPython.utils.PyColorize import Token, theme_table

    real_record = ultratb.VerboseTB.format_record
    real_whole = ultratb.VerboseTB.format_exception_as_a_whole

    def without_source(frame_info):
        filename = getattr(frame_info, "filename", None)
        return bool(filename) and filename.startswith(LIBRARY_ROOTS) and not linecache.getlines(filename)

    def in_library(frame_info):
        filename = getattr(frame_info, "filename", None)
        return bool(filename) and filename.startswith(LIBRARY_ROOTS)

    def format_record(self, frame_info):
        if getattr(self, "mode", "Context") != "Verbose":
            if without_source(frame_info):
                return _LibraryFrame("")
            if getattr(self, "_wasm_kernel_folding", False) and in_library(frame_info):
                folded = _LibraryFrame("")
                folded.with_source = True
                return folded
        return real_record(self, frame_info)

    def format_exception_as_a_whole(self, etype, evalue, *args, **kwargs):
        theme = theme_table[self._theme_name]
        # Called once per exception of a chain: each is folded as its own mark says.
        self._wasm_kernel_folding = getattr(evalue, REFUSAL_MARK, False) is True
        try:
            parts = real_whole(self, etype, evalue, *args, **kwargs)
        finally:
            self._wasm_kernel_folding = False
        for n, part in enumerate(parts):
            collapsed, run, sourced = [], 0, False
            for entry in part + [None]:
                if isinstance(entry, _LibraryFrame):
                    run += 1
                    sourced = sourced or entry.with_source
                    continue
                if run:
                    what = f"{run} frame{'s' * (run != 1)} in library code{'' if sourced else ' without source'}"
                    collapsed.append(theme.format(
                        [(Token, "    "), (Token.ExcName, f"[... {what}; %xmode Verbose lists them]"), (Token, "\n")]))
                    run, sourced = 0, False
                if entry is not None:
                    collapsed.append(entry)
            parts[n] = collapsed
        return parts

    ultratb.VerboseTB.format_record = format_record
    ultratb.VerboseTB.format_exception_as_a_whole = format_exception_as_a_whole


def _complete_modules_in_zips():
    """IPython lists importable modules by walking sys.path folders; IPython 9 no
    longer reads zips on this Python, and the statically linked extensions show up
    in sys.builtin_module_names with dotted names. `import nu<Tab>` should offer numpy."""
    from IPython.core import completerlib

    folder_modules = completerlib.module_list
    root_modules = completerlib.get_root_modules

    def module_list(path):
        if path.endswith(".zip") and zipfile.is_zipfile(path):
            names = [n for n in zipfile.ZipFile(path).namelist() if n.count("/") <= 1]
            return list({m.group("name") for m in map(completerlib.import_re.match, names) if m})
        return folder_modules(path)

    completerlib.module_list = module_list
    completerlib.get_root_modules = lambda: [m for m in root_modules() if "." not in m]
