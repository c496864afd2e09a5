"""The debugger's variables: each container the frontend may open gets a number (a
variablesReference), valid until the debugger resumes, and its children are listed
as debugpy lists them for JupyterLab's variables panel: dunder names under "special
variables", functions under "function variables", classes under "class variables",
then the rest by name; a sequence's items by index, a mapping's by key, paged by
start and count."""

import inspect

# ipykernel's Debugger.accept_variable: names the variables panel never shows.
HIDDEN = frozenset({
    "__name__", "__doc__", "__package__", "__loader__", "__spec__", "__annotations__", "__builtins__",
    "__builtin__", "__display__", "get_ipython", "debugpy", "exit", "quit", "In", "Out", "_oh", "_dh", "_",
    "__", "___",
})
MAX_REPR = 1000  # a value's text in the panel; the whole object stays in the guest
MAX_CHILDREN = 10000  # the most children one container lists, paging included
GROUPS = ("special variables", "function variables", "class variables")


def shown(name):
    """Whether a name of the user's namespace is listed: as ipykernel's
    accept_variable, and never the sandbox's own support modules."""
    if name in HIDDEN or name.startswith(("_i", "_wasm_kernel")):
        return False
    return not (name.startswith("_") and name[1:2].isdigit())


def short_repr(value):
    try:
        text = repr(value)
    except BaseException as err:  # a user's __repr__ may raise anything
        text = f"<repr failed: {type(err).__name__}>"
    return text if len(text) <= MAX_REPR else text[:MAX_REPR - 3] + "..."


def type_name(value):
    return type(value).__name__


def _has_children(value):
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return False
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return len(value) > 0
    return True


def _group_of(name, value):
    if name.startswith("__") and name.endswith("__"):
        return GROUPS[0]
    if inspect.isroutine(value):
        return GROUPS[1]
    if inspect.isclass(value):
        return GROUPS[2]
    return None


class Variables:
    """The numbered containers of one stop (or of one inspectVariables)."""

    def __init__(self):
        self._refs = {}
        self._next = 1

    def clear(self):
        self._refs.clear()

    def new_number(self):
        """The next number, for a container or a frame: as debugpy, frames and
        variables share one count, so no number ever means two things."""
        number = self._next
        self._next += 1
        return number

    def ref(self, kind, value, path):
        """A new number for `value`: kind is "scope" (a dict of names), "group" (a
        list of (name, value) pairs) or "value"; path is its evaluateName."""
        number = self.new_number()
        self._refs[number] = (kind, value, path)
        return number

    def entry(self, name, value, evaluate_name):
        return {
            "name": name,
            "value": short_repr(value),
            "type": type_name(value),
            "evaluateName": evaluate_name,
            "variablesReference": self.ref("value", value, evaluate_name) if _has_children(value) else 0,
        }

    def _group_entry(self, name, pairs):
        return {"name": name, "value": "", "type": "", "evaluateName": name,
                "variablesReference": self.ref("group", pairs, "")}

    def children(self, number, start=0, count=0):
        """The entries of container `number`, or None if it is not (or no longer) known."""
        known = self._refs.get(number)
        if known is None:
            return None
        kind, value, path = known
        if kind == "scope":
            # Grouped first, then filtered, as ipykernel filters debugpy's answer: the
            # groups stay (their dunders and functions in them), hidden names go.
            entries = [e for e in self._named(list(value.items()), lambda n: n) if shown(e["name"])]
        elif kind == "group":
            entries = [self.entry(n, v, e) for n, v, e in value]
        else:
            entries = self._of_value(value, path)
        if start or count:
            entries = entries[start:start + count] if count else entries[start:]
        return entries

    def _named(self, pairs, evaluate, groups=True):
        grouped = {group: [] for group in GROUPS}
        plain = []
        for name, value in pairs:
            group = _group_of(name, value) if groups else None
            if group is not None:
                grouped[group].append((name, value, evaluate(name)))
            else:
                plain.append((name, value))
            if len(plain) >= MAX_CHILDREN:
                break
        entries = [self._group_entry(group, sorted(grouped[group], key=lambda item: item[0])) for group in GROUPS if grouped[group]]
        plain.sort(key=lambda pair: pair[0])
        return entries + [self.entry(name, value, evaluate(name)) for name, value in plain]

    def _of_value(self, value, path):
        if isinstance(value, dict):
            pairs = list(value.items())[:MAX_CHILDREN]
            entries = [self.entry(short_repr(k), v, f"{path}[{short_repr(k)}]") for k, v in pairs]
        elif isinstance(value, (list, tuple)):
            entries = [self.entry(str(i), v, f"{path}[{i}]") for i, v in enumerate(value[:MAX_CHILDREN])]
        elif isinstance(value, (set, frozenset)):
            entries = [self.entry(str(i), v, "") for i, v in enumerate(list(value)[:MAX_CHILDREN])]
        else:
            entries = []
        if isinstance(value, (dict, list, tuple, set, frozenset)):
            entries.append(self.entry("len()", len(value), f"len({path})"))
            return entries
        names = []
        try:
            names = sorted(dir(value))[:MAX_CHILDREN]
        except BaseException:
            pass
        pairs = []
        for name in names:
            try:
                pairs.append((name, getattr(value, name)))
            except BaseException:
                continue
        return self._named(pairs, lambda n: f"{path}.{n}")
