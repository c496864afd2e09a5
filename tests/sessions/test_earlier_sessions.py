"""Which earlier session a newly bound notebook is told about (earlier_sessions.py),
on a real registry file: same file name exactly, same agent and mode, unexpired,
its notebook gone, the most recently active; the line names paths relative to the
notebook's folder."""

from __future__ import annotations

import time
from pathlib import Path

from wasm_kernel.sessions.earlier_sessions import earlier_session, earlier_session_notice
from wasm_kernel.sessions.identity import derive_session_identity
from wasm_kernel.sessions.registry import SessionRegistry


def bound(registry: SessionRegistry, path: Path, agent: str = "alice", mode: str = "notebook") -> str:
    return registry.bind(derive_session_identity(path, mode, None, agent)).session_id


def test_the_newest_session_of_the_same_name_whose_notebook_is_gone_is_the_one_named(tmp_path: Path) -> None:
    for folder in ("course", "a", "b"):  # the notebooks moved out of folders still there
        (tmp_path / folder).mkdir()
    with SessionRegistry(tmp_path / "root") as registry:
        bound(registry, tmp_path / "a" / "hw1.ipynb")
        time.sleep(0.01)
        newest = bound(registry, tmp_path / "b" / "hw1.ipynb")
        new = derive_session_identity(tmp_path / "course" / "hw1.ipynb", agent_key="alice")
        first = registry.bind(new)
        assert first.created and not registry.bind(new).created
        entry = earlier_session(registry, new)
        assert entry is not None and entry.session_id == newest
        notice = earlier_session_notice(registry, new)
    assert notice is not None and str(tmp_path) not in notice
    assert "belonged to ../b/hw1.ipynb, which is gone" in notice
    assert "`wasm-kernel sessions move --replace ../b/hw1.ipynb hw1.ipynb`" in notice


def test_no_earlier_session_of_another_agent_mode_name_or_of_a_notebook_still_there(tmp_path: Path) -> None:
    (tmp_path / "course").mkdir()
    kept = tmp_path / "kept" / "hw_1.ipynb"
    kept.parent.mkdir()
    kept.write_text("{}")
    with SessionRegistry(tmp_path / "root") as registry:
        bound(registry, tmp_path / "a" / "hw_1.ipynb", agent="bob")
        bound(registry, tmp_path / "a" / "hw_1.ipynb", mode="day")
        bound(registry, tmp_path / "a" / "hwX1.ipynb")  # '_' is no wildcard
        bound(registry, tmp_path / "a" / "HW_1.ipynb")  # nor is case ignored
        bound(registry, tmp_path / "a" / "old-hw_1.ipynb")  # the whole file name
        bound(registry, kept)  # a copy's original keeps its session
        new = derive_session_identity(tmp_path / "course" / "hw_1.ipynb", agent_key="alice")
        registry.bind(new)
        assert earlier_session(registry, new) is None
        day = derive_session_identity(tmp_path / "course" / "hw_1.ipynb", "day", None, "alice")
        assert earlier_session_notice(registry, day) is None  # a day's session is not the notebook's for good


def test_an_expired_session_is_not_named(tmp_path: Path) -> None:
    (tmp_path / "course").mkdir()
    with SessionRegistry(tmp_path / "root", ttl_hours=1e-9) as registry:
        bound(registry, tmp_path / "a" / "hw1.ipynb")
    time.sleep(0.01)
    with SessionRegistry(tmp_path / "root") as registry:
        new = derive_session_identity(tmp_path / "course" / "hw1.ipynb", agent_key="alice")
        registry.bind(new)
        assert earlier_session(registry, new) is None
