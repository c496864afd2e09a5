"""Grading an otter-grader assignment inside the guest, for `wasm-kernel grade`.

The host (wasm_kernel/cli/grading/) runs a submission's notebook in a fresh sandbox
with one cell of its own before the submission's cells and one after them per test:

    begin("tests")                      before: otter's grading mode, checks recorded
    run_test(token, spec_json)          after, once per test: the test, its result out

While the submission's cells run, the notebook's `grader.check("q1")` calls run the
tests folder the host staged, which holds only each test's public cases (what the
student had); each call also keeps a shallow copy of the namespace it checked. The
hidden cases exist nowhere in the guest until the submission's last cell has run:
each reaches the guest in its own test cell, which runs the whole test (hidden cases
included) against the namespace of that question's last check, as otter grades a
question where the notebook checked it, or against the final one if it never did.

A result leaves as one display of RESULT_MIME: the case verdicts and their messages
(capped here), the cell's one-time token, and the names of otter's attributes the
submission had replaced. Data only: the host validates it against its own copy of
the tests, and a submission that prints or displays a fake result gains nothing, as
it cannot know a token before its own code has finished.

Tampering: the tests run in the submission's interpreter, as in otter's own
container. What is cheap to check is checked: every function and class attribute of
otter's modules and of doctest is compared, by identity, with what it was when
begin() ran (before any of the submission's code); one that was replaced is put back
before the test runs, and named in the result.
"""

from __future__ import annotations

import json
import sys

RESULT_MIME = "application/vnd.wasm-kernel.otter-result+json"
MESSAGE_MAX_CHARS = 8_000  # each case's message; the host refuses a longer one
_WATCHED = ("otter", "doctest", __name__)  # the modules (and their submodules) compared

_dumps, _loads = json.dumps, json.loads
_snapshots: dict[str, dict] = {}  # test name -> the namespace its last check saw
_pristine: dict[str, tuple[object, dict[str, object], dict[str, dict[str, object]]]] = {}
_publish = None
_FUNCTION, _BUILTIN = type(lambda: None), type(len)
_SKIPPED = frozenset({"__dict__", "__weakref__", "__doc__", "__module__", "__slotnames__", "__abstractmethods__",
                      "_abc_impl", "__annotations__", "__annotate__", "__static_attributes__", "__firstlineno__"})


def _watched(name: str) -> bool:
    return any(name == top or name.startswith(top + ".") for top in _WATCHED)


def _is_code(value: object) -> bool:
    """What a test's behaviour is made of: functions, classes and method descriptors
    (not caches such as __slotnames__, nor submodules bound as a later import runs)."""
    return isinstance(value, (type, _FUNCTION, _BUILTIN, classmethod, staticmethod, property))


def _code_attrs(space: dict) -> dict[str, object]:
    return {key: value for key, value in space.items() if key not in _SKIPPED and _is_code(value)}


def _record() -> None:
    """Every watched module's code, and that of the classes it defines, as it is now."""
    _pristine.clear()
    for name, module in list(sys.modules.items()):
        if module is None or not _watched(name):
            continue
        attrs = _code_attrs(vars(module))
        classes = {key: _code_attrs(vars(value)) for key, value in attrs.items()
                   if isinstance(value, type) and getattr(value, "__module__", None) == name}
        _pristine[name] = (module, attrs, classes)


def _restore() -> list[str]:
    """Put back what the submission replaced since _record(); the names it replaced."""
    changed = []
    for name, (module, attrs, classes) in _pristine.items():
        if sys.modules.get(name) is not module:
            sys.modules[name] = module
            changed.append(name)
        space = vars(module)
        for key, value in attrs.items():
            if space.get(key, _pristine) is not value:
                space[key] = value
                changed.append(f"{name}.{key}")
        for key, recorded in classes.items():
            cls = attrs[key]
            now = _code_attrs(vars(cls))
            for attr in set(now) | set(recorded):
                if now.get(attr, _pristine) is not recorded.get(attr, _pristine):
                    if attr in recorded:
                        setattr(cls, attr, recorded[attr])
                    else:
                        delattr(cls, attr)
                    changed.append(f"{name}.{key}.{attr}")
    return changed


def begin(tests_dir: str) -> None:
    """Before the submission's cells: otter's grading mode, checks recorded, the pristine record."""
    global _publish
    from IPython.core.interactiveshell import InteractiveShell
    from otter import Notebook
    from otter.execute import Checker
    __import__("otter.test_files")  # recorded below with the rest

    # The shell's publisher as it is now: a submission that replaces it later silences
    # only its own displays, not this driver's results.
    _publish = InteractiveShell.instance().display_pub.publish
    real = Checker.__dict__["check"].__func__

    def check(cls, nb_or_test_path, nbmeta_config, test_name=None, global_env=None):
        if global_env is None:
            global_env = sys._getframe(1).f_globals
        name = test_name or nb_or_test_path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")
        _snapshots[name] = dict(global_env)
        return real(cls, nb_or_test_path, nbmeta_config, test_name, global_env)

    Checker.check = classmethod(check)
    Notebook.init_grading_mode(tests_dir)
    _record()


def _message(text: object) -> str:
    text = "" if text is None else str(text)
    if len(text) <= MESSAGE_MAX_CHARS:
        return text
    cut = f"\n[... cut at {MESSAGE_MAX_CHARS:,} characters]"
    return text[: MESSAGE_MAX_CHARS - len(cut)] + cut


def run_test(token: str, spec_json: str) -> None:
    """After the submission's cells: one test, hidden cases included, and its result out."""
    tampered = _restore() if _pristine else ["begin() never ran"]
    from otter.test_files.ok_test import OKTestFile

    spec = _loads(spec_json)
    name = spec["name"]
    env = _snapshots.get(name)
    if env is None:
        env = sys._getframe(1).f_globals
    test = OKTestFile.from_spec(spec, path=f"tests/{name}.py")
    test.run(env)
    cases = [{"passed": bool(r.passed), "message": _message(r.message)} for r in test.test_case_results]
    payload = {"token": token, "test": name, "cases": cases, "tampered": tampered[:50]}
    data = {RESULT_MIME: _loads(_dumps(payload))}
    if _publish is not None:
        _publish(data=data, metadata={})
    else:  # the interpreter restarted since begin(): the shell's publisher is all there is
        from IPython.core.display_functions import publish_display_data

        publish_display_data(data)
