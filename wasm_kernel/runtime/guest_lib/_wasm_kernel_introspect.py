"""Runs inside the guest: what a Jupyter kernel asks about the live namespace
(completion, inspection, is_complete, user_expressions, %who, %whos) and %timeit.

The host runs `query(op, args_json)` as a turn of its own, under tight limits, and
reads the answer from the turn's result: {"application/json": {"value": ...}}.
Everything here touches user objects whose __getattr__, __dir__ or keys() may
misbehave: the host's limits stop a loop, and each lookup catches its own errors
so that one broken object costs its matches, not the whole answer. Names are
resolved by dictionary lookups and getattr only; no user expression is evaluated
(except by user_expressions, whose job that is), and no module is imported.
"""

import builtins
import json
import keyword
import re
import sys

from _wasm_kernel_guest import _initial_names, _user_traceback, call, format_bundle, format_time

MAX_MATCHES = 2000
MAX_KEYS = 10000  # keys() read per object for dict-key completion
MAX_NAME_CHARS = 1000
_IDENT = r"[^\W\d]\w*"
_DOTTED = rf"{_IDENT}(?:\.{_IDENT})*"
# A dotted name not preceded by something that would make it part of a bigger
# expression (`f().x`, `"s".x`, `a[0].x`): those would need evaluation.
_NOT_AFTER = r"(?<![\w.)\]}'\"])"
_MISSING = object()


def _namespace():
    import __main__

    return __main__.__dict__


def _text(value, limit=MAX_NAME_CHARS):
    try:
        text = str(value)
    except Exception:
        text = f"<{type(value).__name__} object: str() failed>"
    return text[:limit]


def query(op, args_json):
    """Run one allowed op with its JSON arguments; the value goes back as the result."""
    try:
        fn = _OPS.get(op)
        if fn is None:
            raise ValueError(f"unknown query {op!r}")
        value = fn(**json.loads(args_json))
        message = {
            "op": "result",
            "status": "ok",
            "exit_code": 0,
            "execute_result": {"data": {"application/json": {"value": value}}, "metadata": {}},
        }
    except BaseException as err:  # SystemExit from a user's __getattr__ is an error here too
        message = {
            "op": "result",
            "status": "error",
            "exit_code": 1,
            "error": {"ename": type(err).__name__, "evalue": _text(err), "traceback": []},
        }
    call(message)


def _resolve(dotted):
    """The object `a.b.c` names in __main__ (or builtins), or _MISSING."""
    first, *rest = dotted.split(".")
    namespace = _namespace()
    if first in namespace:
        obj = namespace[first]
    elif first in vars(builtins):
        obj = vars(builtins)[first]
    else:
        return _MISSING
    for part in rest:
        try:
            obj = getattr(obj, part)
        except Exception:
            return _MISSING
    return obj


def _kind(value):
    """The completion type Jupyter frontends show next to a match."""
    import types

    if isinstance(value, types.ModuleType):
        return "module"
    if isinstance(value, type):
        return "class"
    if isinstance(value, (property, types.GetSetDescriptorType, types.MemberDescriptorType)):
        return "property"
    if callable(value) or isinstance(value, (staticmethod, classmethod)):
        return "function"
    return "instance"


def _visible(name, prefix):
    # As IPython: private names only once the user has typed the underscore.
    return name.startswith(prefix) and (prefix.startswith("_") or not name.startswith("_"))


def _sort_key(item):
    name = item[0].lstrip("'\"")  # dict keys sort by the key, not by their quote
    return (name.startswith("__"), name.startswith("_"), name.lower(), name)


# --- complete ---------------------------------------------------------------


def complete(code, cursor_pos):
    """Jupyter's complete_reply content for the code before `cursor_pos` (code points)."""
    cursor_pos = max(0, min(int(cursor_pos), len(code)))
    line = code[:cursor_pos].rsplit("\n", 1)[-1]
    after = code[cursor_pos:].split("\n", 1)[0]
    found = _import_matches(line) or _key_matches(line, after) or _name_matches(line)
    typed, items, replace_after = found
    seen, unique = set(), []
    for text, kind in sorted(items, key=_sort_key):
        if text not in seen and len(unique) < MAX_MATCHES:
            seen.add(text)
            unique.append((text, kind))
    start = cursor_pos - typed
    # Completing in the middle of a name replaces the rest of it too.
    end = cursor_pos + (len(re.match(r"\w*", after).group()) if replace_after else 0)
    return {
        "matches": [text for text, _ in unique],
        "cursor_start": start,
        "cursor_end": end,
        "metadata": {
            "_jupyter_types_experimental": [
                {"text": text, "type": kind, "start": start, "end": end} for text, kind in unique
            ]
        },
    }


def _name_matches(line):
    m = re.search(rf"{_NOT_AFTER}(?:({_DOTTED})\.)?(\w*)$", line)
    if m is None:  # after `f().`, `"s".`, `x[0].` or a string's quote: needs evaluation
        return len(re.search(r"\w*$", line).group()), [], True
    chain, tail = m.groups()
    if tail and not tail.isidentifier():  # a number
        return len(tail), [], True
    if chain is None:
        return len(tail), _plain_names(tail), True
    obj = _resolve(chain)
    if obj is _MISSING:
        return len(tail), [], True
    return len(tail), _attributes(obj, tail), True


def _plain_names(prefix):
    items = [(k, "keyword") for k in keyword.kwlist + keyword.softkwlist if k.startswith(prefix)]
    for source in (vars(builtins), _namespace()):
        for name, value in list(source.items()):
            if isinstance(name, str) and _visible(name, prefix):
                items.append((name, _kind(value)))
    return items


def _attributes(obj, prefix):
    import inspect

    try:
        names = dir(obj)
    except Exception:
        return []
    items = []
    for name in names:
        if not isinstance(name, str) or not _visible(name, prefix) or len(name) > MAX_NAME_CHARS:
            continue
        try:  # without running properties or __getattr__ for every name
            kind = _kind(inspect.getattr_static(obj, name))
        except Exception:
            kind = "instance"
        items.append((name, kind))
        if len(items) >= MAX_MATCHES:
            break
    return items


def _key_matches(line, after):
    m = re.search(rf"{_NOT_AFTER}({_DOTTED})\s*\[\s*(?:(['\"])((?:[^'\"\\]|\\.)*))?$", line)
    if not m:
        return None
    obj = _resolve(m.group(1))
    quote, typed = m.group(2), m.group(3) or ""
    keys = [] if obj is _MISSING else _keys(obj)
    if not quote and not keys:
        return None  # `x[` of a list: an index, so names are the useful matches
    rest = after
    closes_quote = bool(quote) and rest.startswith(quote)
    if closes_quote:
        rest = rest[1:]
    suffix = ("" if closes_quote or not quote else quote) + ("" if rest.lstrip().startswith("]") else "]")
    items = []
    for key in keys:
        if isinstance(key, str) and key.startswith(typed):
            if quote:
                items.append((key.replace("\\", "\\\\").replace(quote, "\\" + quote) + suffix, "dict key"))
            else:
                items.append((repr(key) + suffix, "dict key"))
    return len(typed), items, False


def _keys(obj):
    import itertools

    try:
        custom = getattr(type(obj), "_ipython_key_completions_", None)
        if custom is not None:
            keys = custom(obj)
        elif isinstance(obj, dict) or callable(getattr(obj, "keys", None)):
            keys = obj.keys()
        else:
            return []
        return list(itertools.islice(iter(keys), MAX_KEYS))
    except Exception:
        return []


def _import_matches(line):
    m = re.match(r"\s*from\s+([\w.]+)\s+import\s+\(?(?:.*,\s*)?(\w*)$", line)
    if m:
        module, tail = m.groups()
        return len(tail), _names_in_module(module, tail), True
    m = re.match(r"\s*(?:from\s+|import\s+(?:.*,\s*)?)([\w.]*)$", line)
    if m:
        dotted = m.group(1)
        package, _, tail = dotted.rpartition(".")
        names = _submodules(package) if package else _top_level_modules()
        return len(tail), [(n, "module") for n in names if _visible(n, tail)], True
    return None


def _top_level_modules():
    import pkgutil

    # Some extension modules are linked in with dotted names (numpy._core...).
    names = {name for name in sys.builtin_module_names if "." not in name}
    names.update(name for name in sys.modules if "." not in name)
    try:
        names.update(info.name for info in pkgutil.iter_modules())
    except Exception:
        pass
    return names


def _search_path(package):
    """Where `package`'s submodules live, found without importing it."""
    module = sys.modules.get(package)
    if module is not None:
        return getattr(module, "__path__", None)
    from importlib.machinery import PathFinder

    path, name = None, ""
    for part in package.split("."):
        name = f"{name}.{part}" if name else part
        try:
            spec = PathFinder.find_spec(name, path)
        except Exception:
            return None
        path = spec and spec.submodule_search_locations
        if not path:
            return None
    return path


def _submodules(package):
    import pkgutil
    import types

    names = set()
    path = _search_path(package)
    if path:
        try:
            names.update(info.name for info in pkgutil.iter_modules(list(path)))
        except Exception:
            pass
    module = sys.modules.get(package)
    if module is not None:  # `import os.pa` offers os.path, as IPython does
        names.update(k for k, v in list(vars(module).items()) if isinstance(v, types.ModuleType))
    return names


def _names_in_module(package, prefix):
    """`from package import prefix`: a loaded module's names, and its submodules.

    A module not imported yet offers only its submodules: completing never runs a
    module's import-time code (and the guest's libraries ship without sources)."""
    items = [(n, "module") for n in _submodules(package) if _visible(n, prefix)]
    module = sys.modules.get(package)
    if module is not None:
        items += _attributes(module, prefix)
    return items


# --- inspect ----------------------------------------------------------------


def _name_at(code, cursor_pos):
    """The dotted name at the cursor, or the callee when the cursor is inside a
    call's parentheses: IPython's token_at_cursor."""
    import io
    import tokenize

    tokens = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            tokens.append(tok)
    except (tokenize.TokenError, SyntaxError):
        pass  # incomplete code: the tokens before the error are enough
    line_starts = [0]
    for text_line in code.splitlines(True):
        line_starts.append(line_starts[-1] + len(text_line))

    def offset(pos):
        row, col = pos
        return line_starts[min(row - 1, len(line_starts) - 1)] + col

    names, calls = [], []
    closing = outer = None
    on_name = intersects = False
    for i, tok in enumerate(tokens):
        closing = None
        if offset(tok.start) > cursor_pos:
            break
        on_name = tok.type == tokenize.NAME and not keyword.iskeyword(tok.string)
        if on_name:
            prev = tokens[i - 1] if i else None
            if names and prev is not None and prev.type == tokenize.OP and prev.string == ".":
                names[-1] = f"{names[-1]}.{tok.string}"
            else:
                names.append(tok.string)
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if nxt is not None and nxt.type == tokenize.OP and nxt.string == "=":
                names.pop()  # the left side of an assignment or a keyword argument
                on_name = False
            if not calls:
                outer = names[-1] if names else None
        elif tok.type == tokenize.OP:
            if tok.string == "(" and names:
                calls.append(names[-1])
            elif tok.string == ")" and calls:
                closing = calls.pop()
        if offset(tok.end) > cursor_pos:
            intersects = offset(tok.start) <= cursor_pos
            break
    if on_name and intersects and names:
        return names[-1]
    return (calls[-1] if calls else None) or closing or outer or (names[-1] if names else "")


def inspect(code, cursor_pos, detail_level=0):
    """Jupyter's inspect_reply content: IPython's `obj?` (detail 0) or `obj??` (1)."""
    cursor_pos = max(0, min(int(cursor_pos), len(code)))
    name = _name_at(code, cursor_pos)
    obj = _resolve(name) if name else _MISSING
    if obj is _MISSING:
        return {"found": False, "data": {}, "metadata": {}}
    return {"found": True, "data": {"text/plain": _pinfo(name, obj, int(detail_level))}, "metadata": {}}


def _pinfo(name, obj, detail_level):
    import inspect as std_inspect
    import types

    def attempt(fn, *args):
        try:
            return fn(*args)
        except Exception:
            return None

    is_class = isinstance(obj, type)
    simple_callable = isinstance(
        obj,
        (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.MethodDescriptorType),
    )
    signature = attempt(std_inspect.signature, obj) if callable(obj) else None
    definition = None if signature is None else f"{name}{signature}"
    doc = attempt(std_inspect.getdoc, obj)
    # Where an instance's code lives is its class's.
    target = obj if is_class or simple_callable or isinstance(obj, types.ModuleType) else type(obj)
    source = None
    if detail_level > 0:
        source = attempt(std_inspect.getsource, target)
        if source is None and isinstance(target, type):
            source = attempt(_cell_class_source, target)
    if source and doc and _source_has_docstring(source, doc):
        doc = None  # the source shows it already; IPython does not repeat it
    elif doc is None:
        doc = "<no docstring>"
    file = attempt(std_inspect.getfile, target)
    if file and file.startswith("<") and file.endswith(">"):
        file = None  # a cell, not a file the user could open
    fields = []
    if is_class or simple_callable:
        fields.append(("Init signature" if is_class else "Signature", definition))
        fields.append(("Docstring", doc))
        fields.append(("Source", source))
        fields.append(("File", file))
        fields.append(("Type", type(obj).__name__))
    else:
        fields.append(("Call signature" if callable(obj) else "Signature", definition))
        fields.append(("Type", type(obj).__name__))
        form = _text(obj, 100000)
        if detail_level == 0 and len(form) > 200:
            form = form[:97] + " <...> " + form[-97:]
        fields.append(("String form", form))
        length = attempt(len, obj) if hasattr(type(obj), "__len__") else None
        fields.append(("Length", None if length is None else str(length)))
        fields.append(("File", file))
        fields.append(("Source" if source else "Docstring", source or doc))
    fields = [(head, body.strip("\n")) for head, body in fields if body]
    width = max(len(head) for head, _ in fields)
    return "\n".join(
        f"{head}:{' ' * (width - len(head))}{chr(10) if chr(10) in body else ' '}{body}"
        for head, body in fields
    )


def _cell_class_source(cls):
    """A class defined in a cell: inspect finds no file for __main__, but its
    methods know their cell and the class knows its first line."""
    import inspect
    import linecache

    for value in vars(cls).values():
        code = getattr(getattr(value, "__func__", value), "__code__", None)
        if code is not None:
            lines = linecache.getlines(code.co_filename)
            return "".join(inspect.getblock(lines[cls.__firstlineno__ - 1 :]))
    return None


def _source_has_docstring(source, doc):
    import ast
    import textwrap

    try:
        (node,) = ast.parse(textwrap.dedent(source)).body
        return ast.get_docstring(node) == doc
    except Exception:
        return False


# --- is_complete ------------------------------------------------------------


def is_complete(code):
    """Whether a console should run `code` now, as IPython's check_complete decides:
    codeop.compile_command, and code that ends inside an indented block waits for
    a trailing newline (the blank line a console user types to finish a block)."""
    import codeop
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", SyntaxWarning)
            compiled = codeop.compile_command(code, "<input>", "exec")
    except (SyntaxError, OverflowError, ValueError, TypeError, MemoryError, SyntaxWarning):
        return {"status": "invalid"}
    last = (code.splitlines() or [""])[-1]
    indent = last[: len(last) - len(last.lstrip())].replace("\t", "    ")
    if compiled is None:
        if last.split("#", 1)[0].rstrip().endswith(":"):
            indent += "    "
        return {"status": "incomplete", "indent": indent}
    if _ends_in_block(code) and not code.rstrip(" \t\r\f\v").endswith("\n"):
        return {"status": "incomplete", "indent": indent}
    return {"status": "complete"}


def _ends_in_block(code):
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    return len(tokens) >= 2 and tokens[-2].type == tokenize.DEDENT


# --- user_expressions -------------------------------------------------------


def user_expressions(expressions):
    """Evaluate each expression in __main__: an execute_reply's user_expressions."""
    namespace = _namespace()
    out = {}
    for key, source in dict(expressions).items():
        try:
            value = eval(compile(str(source), "<user-expression>", "eval"), namespace)
            data, metadata = format_bundle(value)
            out[str(key)] = {"status": "ok", "data": data, "metadata": metadata}
        except BaseException as err:
            if err.__traceback__ is not None:  # without this function's own frame
                err = err.with_traceback(err.__traceback__.tb_next)
            out[str(key)] = {
                "status": "error",
                "ename": type(err).__name__,
                "evalue": _text(err, 10000),
                "traceback": _user_traceback(err),
            }
    return out


# --- %who, %whos ------------------------------------------------------------


def _who_names(pattern):
    """IPython's who_ls: user variables, optionally only of the given type names."""
    namespace = _namespace()
    names = [
        name
        for name, value in list(namespace.items())
        if isinstance(name, str)
        and not name.startswith("_")
        and value is not _initial_names.get(name, _MISSING)
    ]
    types_wanted = set((pattern or "").split())
    if types_wanted:
        names = [n for n in names if type(namespace[n]).__name__ in types_wanted]
    return sorted(names)


def _nothing(pattern):
    return "No variables match your requested type.\n" if pattern else "Interactive namespace is empty.\n"


def who(pattern=None):
    """What IPython's `%who [type ...]` prints: names and tabs, nine to a line."""
    names = _who_names(pattern)
    if not names:
        return _nothing(pattern)
    out = []
    for i, name in enumerate(names, 1):
        out.append(name + "\t ")
        if i % 9 == 0:
            out.append("\n")
    return "".join(out) + "\n"


def whos(pattern=None):
    """What IPython's `%whos [type ...]` prints: a Variable / Type / Data/Info table."""
    names = _who_names(pattern)
    if not names:
        return _nothing(pattern)
    namespace = _namespace()
    values = [namespace[n] for n in names]
    types_ = [type(v).__name__ for v in values]
    ndarray = getattr(sys.modules.get("numpy"), "ndarray", None)
    varwidth = max(max(map(len, names)), len("Variable")) + 3
    typewidth = max(max(map(len, types_)), len("Type")) + 3
    lines = [
        "Variable".ljust(varwidth) + "Type".ljust(typewidth) + " Data/Info",
        "-" * (varwidth + typewidth + len("Data/Info") + 1),
    ]
    for name, value, tname in zip(names, values, types_):
        head = f"{name:<{varwidth}}{tname:<{typewidth}} "
        try:
            if tname in ("dict", "list", "tuple"):
                info = f"n={len(value)}"
            elif ndarray is not None and isinstance(value, ndarray):
                shape = str(value.shape).replace(",", "").replace(" ", "x")[1:-1]
                nbytes = value.size * value.itemsize
                info = f"{shape}: {value.size} elems, type `{value.dtype}`, {nbytes} bytes"
                if nbytes >= 100000:
                    info += f" ({nbytes / 1024} kb)" if nbytes < 1048576 else f" ({nbytes / 1048576} Mb)"
            else:
                info = str(value).replace("\n", "\\n")
                if len(info) >= 50:
                    info = info[:25] + "<...>" + info[-25:]
        except Exception:
            info = f"<object with id {id(value)} (str() failed)>"
        lines.append(head + info)
    return "\n".join(lines) + "\n"


# --- %timeit ----------------------------------------------------------------

_TIMEIT_TEMPLATE = """\
def inner(_it, _timer):
    setup
    _t0 = _timer()
    for _i in _it:
        stmt
    _t1 = _timer()
    return _t1 - _t0
"""


def timeit(stmt, setup="pass", number=0, repeat=7, quiet=False, precision=3):
    """IPython's %timeit: `stmt` (a line, or a %%timeit cell body with `setup` from
    its line) run in __main__'s namespace, reported as `mean ± std per loop`.

    number=0 picks the loop count as IPython does: the first power of ten whose run
    takes at least 0.2 s. Prints the report; returns None (no Out value)."""
    import ast
    import time
    import timeit as std_timeit

    setup_body = ast.parse(setup, "<magic-timeit-setup>", "exec").body or [ast.Pass()]
    stmt_body = ast.parse(stmt, "<magic-timeit-stmt>", "exec").body or [ast.Pass()]

    def fill(body, placeholder, replacement):
        return [
            new
            for node in body
            for new in (
                replacement
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Name) and node.value.id == placeholder
                else [node]
            )
        ]

    template = ast.parse(_TIMEIT_TEMPLATE)
    inner = template.body[0]
    inner.body = fill(inner.body, "setup", setup_body)
    for node in inner.body:
        if isinstance(node, ast.For):
            node.body = fill(node.body, "stmt", stmt_body)
    local = {}
    # The user's namespace is the function's globals: the statement sees their names.
    exec(compile(ast.fix_missing_locations(template), "<magic-timeit>", "exec"), _namespace(), local)
    timer = std_timeit.Timer(timer=time.perf_counter)
    timer.inner = local["inner"]
    number, repeat = int(number), max(1, int(repeat))
    if number <= 0:
        for index in range(10):
            number = 10**index
            if timer.timeit(number) >= 0.2:
                break
    runs = timer.repeat(repeat, number)
    if quiet:
        return None
    timings = [run / number for run in runs]
    best, worst = min(timings), max(timings)
    if worst > 4 * best and best > 0 and worst > 1e-6:
        print(
            "The slowest run took %0.2f times longer than the fastest. "
            "This could mean that an intermediate result is being cached." % (worst / best)
        )
    import math

    mean = math.fsum(timings) / len(timings)
    std = (math.fsum((t - mean) ** 2 for t in timings) / len(timings)) ** 0.5
    print(
        f"{format_time(mean, precision)} \u00b1 {format_time(std, precision)} per loop "
        f"(mean \u00b1 std. dev. of {repeat} run{'' if repeat == 1 else 's'}, "
        f"{number:,} loop{'' if number == 1 else 's'} each)"
    )
    return None


_OPS = {
    "complete": complete,
    "inspect": inspect,
    "is_complete": is_complete,
    "user_expressions": user_expressions,
    "who": who,
    "whos": whos,
}
