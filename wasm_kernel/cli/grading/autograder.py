"""An otter autograder zip (`otter assign`'s autograder/*.zip), read as data.

What grading takes from it:
- otter_config.json: the assignment's name and otter's grading settings
  (AutograderConfig: points_possible, show_hidden, seed, ...);
- tests/*.py: each question's tests (test_specs.py: parsed, never run on the host);
- files/: the support files otter copies beside each submission (data files);
- environment.yml's pip list and requirements.txt: the packages the submissions
  need, which become the graders' course environment in the guest (otter-grader
  among them; its grading extras and conda's own packages are the host's business).

setup.sh, run_autograder and run_otter.py are otter's container scripts: never run.
Settings this grader cannot honour are refused in one line rather than ignored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .safe_zip import BoundedZip, ZipError, ZipLimits
from .test_specs import QuestionSpec, SpecError, parse_test_file

CONFIG_NAME = "otter_config.json"
_TEXT_MAX = 1 << 20  # otter_config.json, environment.yml, requirements.txt, each test file
_MAX_TESTS = 500
# Settings whose effect this grader does not reproduce: refused, so no grade is silently different.
_UNSUPPORTED = {
    "grade_from_log": "grading from otter's log",
    "plugins": "otter plugins",
    "pdf": "PDF generation",
    "token": "Gradescope PDF upload",
    "zips": None,  # otter grade's own switch for zip submissions: this grader reads zips anyway
}
_REQUIREMENT_LINE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-\[\],<>=!~ ;'\"().*+]*")


class AutograderError(ValueError):
    """An autograder zip this grader cannot use; the message is one line."""


@dataclass
class Autograder:
    path: Path
    config: dict[str, Any]
    tests: dict[str, QuestionSpec]  # test name -> spec, in name order (otter's sorted glob)
    files: dict[tuple[str, ...], tuple[str, ...]]  # zip member -> path beside the submission
    requirements: list[str] = field(default_factory=list)

    @property
    def name(self) -> str | None:
        value = self.config.get("assignment_name")
        return value if isinstance(value, str) else None

    def ag_config(self) -> Any:
        """otter's AutograderConfig for this zip (what shapes results.json)."""
        from otter.run import AutograderConfig

        return AutograderConfig({k: v for k, v in self.config.items() if k not in _UNSUPPORTED})

    @classmethod
    def open(cls, path: Path) -> Autograder:
        if not path.is_file():
            raise AutograderError(f"{path}: no such file")
        try:
            with BoundedZip(path, ZipLimits(), what=f"the autograder zip {path.name}") as zf:
                return cls._read(path, zf)
        except ZipError as err:
            raise AutograderError(str(err)) from None

    @classmethod
    def _read(cls, path: Path, zf: BoundedZip) -> Autograder:
        def text(parts: tuple[str, ...]) -> str:
            try:
                return zf.read(parts, _TEXT_MAX).decode("utf-8")
            except UnicodeDecodeError:
                raise AutograderError(f"{'/'.join(parts)} in {path.name} is not UTF-8 text") from None

        config: dict[str, Any] = {}
        if (CONFIG_NAME,) in zf.files:
            try:
                config = json.loads(text((CONFIG_NAME,)))
            except json.JSONDecodeError as err:
                raise AutograderError(f"{CONFIG_NAME} in {path.name} is not JSON: {err}") from None
            if not isinstance(config, dict):
                raise AutograderError(f"{CONFIG_NAME} in {path.name} is not a JSON object")
        for key, what in _UNSUPPORTED.items():
            if what and config.get(key):
                raise AutograderError(f"{path.name} asks for {what} ({key} in {CONFIG_NAME}), which wasm-kernel "
                                      "grade does not do; grade this assignment with otter itself")
        if config.get("lang", "python") != "python":
            raise AutograderError(f"{path.name} is an assignment in {config.get('lang')!r}; wasm-kernel grade "
                                  "grades Python assignments")
        tests: dict[str, QuestionSpec] = {}
        for parts in sorted(zf.files):
            if len(parts) == 2 and parts[0] == "tests" and parts[1].endswith(".py") and parts[1] != "__init__.py":
                try:
                    spec = parse_test_file(text(parts), "/".join(parts))
                except SpecError as err:
                    raise AutograderError(f"{path.name}: {err}") from None
                if spec.name in tests:
                    raise AutograderError(f"{path.name}: two test files are named {spec.name!r}")
                tests[spec.name] = spec
        if not tests:
            raise AutograderError(f"{path.name} has no tests/*.py: is it an otter autograder zip "
                                  "(otter assign's autograder/*.zip)?")
        if len(tests) > _MAX_TESTS:
            raise AutograderError(f"{path.name} has {len(tests)} test files, more than {_MAX_TESTS}")
        files = {parts: parts[1:] for parts in zf.files if len(parts) > 1 and parts[0] == "files"}
        grader = cls(path, config, tests, files)
        grader.requirements = _requirements(zf, text, path.name)
        _check_types(config, path.name)
        try:
            grader.ag_config()
        except Exception as err:  # fica's own errors for a setting it refuses
            raise AutograderError(f"{CONFIG_NAME} in {path.name}: {str(err).splitlines()[0]}") from None
        return grader


# The settings grading uses, and what each must be (fica checks none of their types).
_NUMBER, _FLAG = (int, float), (bool,)
_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "assignment_name": ((str,), "a string"), "points_possible": (_NUMBER, "a number"),
    "score_threshold": (_NUMBER, "a number"), "seed": ((int,), "a whole number"),
    "seed_variable": ((str,), "a variable name"), "show_hidden": (_FLAG, "true or false"),
    "show_all_public": (_FLAG, "true or false"), "show_stdout": (_FLAG, "true or false"),
    "force_public_test_summary": (_FLAG, "true or false"), "warn_missing_pdf": (_FLAG, "true or false"),
    "print_summary": (_FLAG, "true or false"), "print_score": (_FLAG, "true or false"),
}


def _check_types(config: dict[str, Any], zip_name: str) -> None:
    for key, (types, what) in _TYPES.items():
        value = config.get(key)
        if value is None:
            continue
        wrong = not isinstance(value, types) or (isinstance(value, bool) and bool not in types)
        if key == "seed_variable" and not wrong:
            wrong = not value.isidentifier()
        if wrong:
            raise AutograderError(f"{CONFIG_NAME} in {zip_name}: {key} must be {what}, not {value!r:.60}")


def _requirements(zf: BoundedZip, text: Any, zip_name: str) -> list[str]:
    """The pip requirements of environment.yml and requirements.txt, otter's extras dropped."""
    import yaml

    lines: list[str] = []
    if ("environment.yml",) in zf.files:
        try:
            env = yaml.safe_load(text(("environment.yml",)))
        except yaml.YAMLError as err:
            raise AutograderError(f"environment.yml in {zip_name} is not YAML: {str(err).splitlines()[0]}") from None
        deps = env.get("dependencies") if isinstance(env, dict) else None
        for dep in deps if isinstance(deps, list) else []:
            if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
                lines += [str(item) for item in dep["pip"]]
    if ("requirements.txt",) in zf.files:
        lines += text(("requirements.txt",)).splitlines()
    kept: list[str] = []
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not _REQUIREMENT_LINE.fullmatch(line):
            raise AutograderError(f"{zip_name}: {line[:80]!r} is not a requirement wasm-kernel grade can install "
                                  "(names and versions only: no options, URLs or paths)")
        # otter-grader[grading,plugins]: the guest needs only otter's student side.
        line = re.sub(r"^(otter[-_]grader)\[[^\]]*\]", r"\1", line, flags=re.IGNORECASE)
        if line not in kept:
            kept.append(line)
    return kept
