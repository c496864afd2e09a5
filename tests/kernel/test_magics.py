"""Magics over the wire: what they show, and every way a notebook might use them to
reach past its own session."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.kernel_client import RunningKernel


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningKernel]:
    k = RunningKernel(tmp_path_factory.mktemp("magic-data"), argv=["--WasmKernel.max_memory=1073741824",
                                                                   "--WasmKernel.memory=536870912"])
    yield k
    k.shutdown()


def plain(run) -> str:  # type: ignore[no-untyped-def]
    return run.stream() + "".join(d["data"].get("text/plain", "") for d in run.displays())


def test_session_shows_id_identity_and_limits(kernel: RunningKernel) -> None:
    text = plain(kernel.execute("%session"))
    assert re.search(r"session id\s+[0-9a-f-]{36}", text)
    assert "limit: memory" in text and "512 MiB" in text
    assert "/app" in text
    assert str(kernel.sessions_root) not in text  # no host path of the workspace


def test_writefile_cat_files_rm_round_trip(kernel: RunningKernel) -> None:
    run = kernel.execute("%%writefile notes/todo.txt\nline one\nline two")
    assert run.status == "ok" and "Writing notes/todo.txt" in run.stream()
    assert kernel.execute("%%writefile -a notes/todo.txt\nline three").stream().startswith("Appending to")
    assert kernel.execute("%cat notes/todo.txt").stream() == "line one\nline two\nline three\n"
    listing = plain(kernel.execute("%files notes/*"))
    assert "notes/todo.txt" in listing and "B" in listing
    assert kernel.execute("open('notes/todo.txt').read().count('line')").of_type("execute_result")[0]["data"]["text/plain"] == "3"
    assert kernel.execute("%rm notes/todo.txt").status == "ok"
    assert kernel.execute("%cat notes/todo.txt").status == "error"


def test_writefile_reports_its_own_file_change(kernel: RunningKernel) -> None:
    run = kernel.execute("%%writefile made_by_magic.txt\nx")
    meta = run.reply["content"]["metadata"]
    assert meta["files_created"] == ["made_by_magic.txt"]
    assert run.file_changes()


def test_cat_refuses_binary_files_with_their_size(kernel: RunningKernel) -> None:
    kernel.execute("open('blob.bin', 'wb').write(bytes(range(256)) * 4)")
    run = kernel.execute("%cat blob.bin")
    assert run.status == "error"
    assert "binary" in run.reply["content"]["evalue"] and "1 KiB" in run.reply["content"]["evalue"]


@pytest.mark.parametrize(
    "magic",
    [
        "%cat ../x", "%cat /etc/passwd", "%cat ../../../../etc/passwd", "%rm -r ..", "%rm /tmp",
        "%files ../*", "%files /etc/*", "%%writefile ../escape.txt\nx", "%%writefile /tmp/escape.txt\nx",
        "%cat a\x00b",
    ],
)
def test_magics_refuse_paths_outside_the_workspace(kernel: RunningKernel, magic: str) -> None:
    run = kernel.execute(magic)
    assert run.status == "error", plain(run)
    assert run.reply["content"]["ename"] == "UsageError"
    assert run.stream("stderr").startswith("UsageError: ") and run.stream("stderr").count("\n") == 1  # one line
    assert not Path("/tmp/escape.txt").exists()


def test_magics_do_not_follow_links_the_guest_planted(kernel: RunningKernel, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    target_dir = tmp_path / "outside"
    target_dir.mkdir()
    workspace = kernel.sessions_root / kernel.session_id()
    # Relative links climbing out of /app: WASI lets the guest make them.
    to_secret, to_dir = os.path.relpath(secret, workspace), os.path.relpath(target_dir, workspace)
    made = kernel.execute(f"import os\nos.symlink({to_secret!r}, 'link.txt')\nos.symlink({to_dir!r}, 'linkdir')")
    assert made.status == "ok", made.error
    assert (workspace / "linkdir").is_symlink() and (workspace / "linkdir").resolve() == target_dir
    cat = kernel.execute("%cat link.txt")
    assert cat.status == "error" and "host secret" not in plain(cat)
    write = kernel.execute("%%writefile linkdir/planted.txt\npwned")
    assert write.status == "error"
    assert not (target_dir / "planted.txt").exists()
    rm = kernel.execute("%rm linkdir")  # removes the link itself, never what it points to
    assert rm.status == "ok" and target_dir.is_dir()
    listing = plain(kernel.execute("%files"))
    assert "link.txt (link)" in listing and "host secret" not in listing


def test_limits_go_downward_only_and_back_up_to_the_operators_value(kernel: RunningKernel) -> None:
    assert kernel.execute("%limits memory=256MB deadline=30s").status == "ok"
    shown = plain(kernel.execute("%limits"))
    assert re.search(r"memory\s+244 MiB", shown) or re.search(r"memory\s+256", shown)
    refused = kernel.execute("%limits memory=1GiB")  # the operator gave this kernel 512 MiB
    assert refused.status == "error"
    evalue = refused.reply["content"]["evalue"]
    assert "memory" in evalue and "64 MiB to 512 MiB" in evalue and "c.WasmKernel.memory" in evalue, evalue
    assert kernel.execute("%limits memory=512MiB").status == "ok"  # back to the operator's value
    assert kernel.execute("%limits bogus=1").reply["content"]["evalue"].startswith("unknown limit")
    assert kernel.execute("%limits memory=lots").status == "error"
    assert kernel.execute("%limits deadline=none memory=512MiB").status == "ok"


@pytest.mark.parametrize("value", ["1e400", "99999999999999999999999999999999999999", "inf", "nan", "-1", "0",
                                   "1e300GiB", "10**400", "1e-400"])
def test_out_of_range_limits_get_one_line_naming_the_range(kernel: RunningKernel, value: str) -> None:
    for magic in (f"%limits cpu={value}", f"%limits deadline={value}", f"%config WasmKernel.memory = {value}"):
        run = kernel.execute(magic)
        assert run.status == "error", magic
        evalue = run.reply["content"]["evalue"]
        assert "Overflow" not in evalue and "\n" not in evalue and " accepts " in evalue, (magic, evalue)
    assert kernel.execute("%limits").status == "ok"


def test_lowered_memory_limit_is_enforced_in_the_guest(kernel: RunningKernel) -> None:
    kernel.execute("%limits memory=128MiB")
    try:
        run = kernel.execute("big = bytearray(300 * 1024 * 1024)")
        assert run.status == "error"
        assert "MemoryError" in (run.reply["content"]["ename"] + run.reply["content"]["evalue"]) or "memory" in run.reply["content"]["evalue"].lower()
    finally:
        kernel.execute("%limits memory=512MiB")


def test_config_reaches_only_the_allow_list(kernel: RunningKernel) -> None:
    assert kernel.execute("%config WasmKernel.fuel = 1000000000").status == "ok"
    assert "1000000000" in kernel.execute("%config WasmKernel.fuel").stream()
    over = kernel.execute("%config WasmKernel.memory = 4294967296")
    assert over.status == "error" and "512 MiB" in over.reply["content"]["evalue"]
    listing = plain(kernel.execute("%config WasmKernel"))
    assert "WasmKernel.fuel" in listing and "WasmKernel.show_file_changes" in listing
    assert "workspace_root" not in listing and str(kernel.sessions_root) not in listing
    # The operator's traits and those inherited from ipykernel: neither read nor set.
    for trait in ("max_memory = 4294967296", "workspace_root = '/'", "workspace_root", "prune_all_users = True",
                  "session_scope = 'day'", "agent_key", "pip_index_url = 'http://evil'", "max_fuel",
                  "_darwin_app_nap = False", "debug_just_my_code = False", "stop_on_error_timeout = 0",
                  "log", "connection_file", "no_such_trait = 1"):
        run = kernel.execute(f"%config WasmKernel.{trait}")
        assert run.status == "error", trait
        evalue = run.reply["content"]["evalue"]
        assert "not configurable from a notebook" in evalue and str(kernel.sessions_root) not in evalue, trait
    assert kernel.execute("%config WasmKernel.fuel = None").status == "error"  # unlimited is above 5e11
    assert kernel.execute("%config WasmKernel.fuel = 500000000000").status == "ok"
    assert kernel.execute("%config WasmKernel.cpu_time = 10").status == "ok"
    assert "10.0" in kernel.execute("%config WasmKernel.cpu_time").stream()
    assert kernel.execute("%config WasmKernel.cpu_time = None").status == "error"  # unlimited is above 1 h
    assert kernel.execute("%config WasmKernel.cpu_time = 60").status == "ok"
    # The metering is the operator's: a notebook can neither see it as a setting nor change it.
    assert "WasmKernel.metering" not in listing
    switched = kernel.execute("%config WasmKernel.metering = 'fuel'")
    assert switched.status == "error" and "not configurable from a notebook" in switched.reply["content"]["evalue"]


def test_show_file_changes_can_be_switched_off_and_metadata_stays(kernel: RunningKernel) -> None:
    kernel.execute("%config WasmKernel.show_file_changes = False")
    try:
        run = kernel.execute("open('quiet.txt', 'w').write('q')")
        assert run.file_changes() == []
        assert run.reply["content"]["metadata"]["files_created"] == ["quiet.txt"]
    finally:
        kernel.execute("%config WasmKernel.show_file_changes = True")


def test_file_change_display_lists_created_modified_deleted_with_sizes(kernel: RunningKernel) -> None:
    kernel.execute("open('keep.txt', 'w').write('1')\nopen('gone.txt', 'w').write('2')")
    run = kernel.execute(
        "open('new.txt', 'w').write('hello')\nopen('keep.txt', 'a').write('more')\nimport os\nos.remove('gone.txt')"
    )
    meta = run.reply["content"]["metadata"]
    assert meta["files_created"] == ["new.txt"]
    assert meta["files_modified"] == ["keep.txt"]
    assert meta["files_deleted"] == ["gone.txt"]
    [display] = run.file_changes()
    payload = display["data"]["application/vnd.wasm-kernel.file-changes+json"]
    assert payload["created"] == [{"path": "new.txt", "size": 5}]
    assert payload["modified"] == [{"path": "keep.txt", "size": 5}]
    assert payload["deleted"] == [{"path": "gone.txt"}]
    assert "<table>" in display["data"]["text/html"]
    assert "+new.txt (5 B)" in display["data"]["text/plain"]
    assert display["transient"]["display_id"].startswith("wasm-kernel-files-")
    assert kernel.execute("x = 1").file_changes() == []  # nothing changed: nothing shown


def test_time_and_timeit_run_in_the_guest(kernel: RunningKernel) -> None:
    timed = kernel.execute("%time sum(range(1000))")
    assert re.search(r"CPU times: .*\nWall time: [\d.]+ (ns|μs|ms|s)", timed.stream())
    assert timed.of_type("execute_result")[0]["data"]["text/plain"] == "499500"
    cell = kernel.execute("%%time\nt = 41\nt + 1")
    assert "Wall time" in cell.stream() and cell.of_type("execute_result")[0]["data"]["text/plain"] == "42"
    out = kernel.execute("tx = 3\n%timeit -n 100 -r 3 tx ** 2").stream()
    assert re.search(r"± .* per loop \(mean ± std\. dev\. of 3 runs, 100 loops each\)", out), out


def test_who_and_whos_list_user_variables(kernel: RunningKernel) -> None:
    kernel.execute("%reset -f")
    assert "Interactive namespace is empty" in kernel.execute("%who").stream()
    kernel.execute("alpha = 1\nbeta = 'b'\nimport json")
    who = kernel.execute("%who").stream()
    assert "alpha" in who and "beta" in who and "json" in who
    whos = kernel.execute("%whos").stream()
    assert re.search(r"alpha\s+int\s+1", whos)
    assert "Variable" in whos and "---" in whos


def test_reset_keeps_files_and_drops_variables(kernel: RunningKernel) -> None:
    kernel.execute("doomed = 1\nopen('survivor.txt', 'w').write('s')")
    assert "files in the workspace are kept" in kernel.execute("%reset -f").stream()
    assert kernel.execute("doomed").reply["content"]["ename"] == "NameError"
    assert kernel.execute("open('survivor.txt').read()").of_type("execute_result")[0]["data"]["text/plain"] == "'s'"


def test_matplotlib_inline_is_accepted_and_other_backends_refused(kernel: RunningKernel) -> None:
    assert kernel.execute("%matplotlib inline").status == "ok"
    assert kernel.execute("%matplotlib qt").status == "error"


def test_lsmagic_lists_the_hosts_and_ipythons_magics_grouped(kernel: RunningKernel) -> None:
    listing = kernel.execute("%lsmagic").of_type("execute_result")[0]["data"]["text/plain"]
    host, ipython = listing.split("IPython magics (run in the sandbox):")
    for name in ("%session", "%files", "%cat", "%rm", "%prune", "%limits", "%reset", "%undo", "%config", "%%writefile"):
        assert name in host, name
    for name in ("%time", "%timeit", "%who", "%whos", "%matplotlib", "%history", "%%time", "%%timeit", "%%capture"):
        assert name in ipython, name
    assert "%files" not in ipython and "%undo" not in ipython
    run = kernel.execute("%limits?")
    [page] = run.reply["content"]["payload"]
    assert page["source"] == "page" and "%limits" in page["data"]["text/plain"]


def test_unknown_magic_lists_the_known_ones(kernel: RunningKernel) -> None:
    run = kernel.execute("%bogus")
    assert run.status == "error"
    assert "%bogus" in run.reply["content"]["evalue"] and "%session" in run.reply["content"]["evalue"]


def test_magics_mix_with_code_in_one_cell(kernel: RunningKernel) -> None:
    run = kernel.execute("%matplotlib inline\nmixed = 6\nmixed * 7")
    assert run.status == "ok"
    assert run.of_type("execute_result")[0]["data"]["text/plain"] == "42"


def _make_idle_session(root: Path, agent: str, days_old: int) -> str:
    """A session of `agent` last used `days_old` days ago, made through the public API."""
    from datetime import timedelta

    from wasm_kernel import SessionRegistry, derive_session_identity
    from wasm_kernel.sessions.metadata import format_timestamp, utc_now

    with SessionRegistry(root) as registry:
        sid = registry.get_or_create_session(derive_session_identity(f"/nb/{agent}-{days_old}.ipynb", "notebook", None, agent))
    (root / sid).mkdir(parents=True)
    (root / sid / "data.txt").write_text("x" * 100)
    meta = root / ".wasm-kernel" / "sessions" / f"{sid}.json"
    stamp = format_timestamp(utc_now() - timedelta(days=days_old))
    meta.write_text(json.dumps({"session_id": sid, "created_at": stamp, "updated_at": stamp, "version": 1}))
    return sid


@pytest.mark.slow
def test_prune_only_touches_this_users_idle_sessions(tmp_path: Path) -> None:
    me = os.environ.get("JUPYTERHUB_USER") or __import__("getpass").getuser()
    k = RunningKernel(tmp_path / "data")
    try:
        mine = k.session_id()
        root = k.sessions_root
        old_mine = _make_idle_session(root, me, 3)
        old_other = _make_idle_session(root, "someone-else", 3)
        dry = k.execute("%prune --older-than 24h --dry-run")
        assert "(dry run)" in dry.stream() and old_mine in dry.stream() and old_other not in dry.stream()
        assert (root / old_mine).is_dir()
        # As `wasm-kernel sessions prune`: a bare number is hours (96 h > 3 days), weeks work.
        for older_than in ("96", "1w"):
            assert old_mine not in k.execute(f"%prune --older-than {older_than} --dry-run").stream()
        assert k.execute("%prune --older-than soon").reply["content"]["evalue"].startswith("%prune --older-than: bad duration")
        real = k.execute("%prune --older-than 1h")
        assert real.status == "ok", plain(real)
        assert not (root / old_mine).exists()
        assert (root / old_other).is_dir()  # another user's: never considered
        assert (root / mine).is_dir()  # this notebook's own session
        assert k.execute("%prune --older-than 0h").status == "ok"
        assert (root / mine).is_dir()
    finally:
        k.shutdown()


def test_limits_are_all_or_nothing_and_bad_values_are_one_line(kernel: RunningKernel) -> None:
    before = plain(kernel.execute("%limits"))
    run = kernel.execute("%limits deadline=5s memory=1")  # the second is below the 64 MiB floor
    assert run.status == "error" and run.reply["content"]["ename"] == "UsageError"
    assert "64 MiB" in run.reply["content"]["evalue"] and run.stream("stderr").count("\n") == 1
    assert plain(kernel.execute("%limits")) == before  # the valid deadline was not applied either


def test_a_bare_double_percent_is_a_usage_error(kernel: RunningKernel) -> None:
    run = kernel.execute("%%\nprint('x')")
    assert run.reply["content"]["ename"] == "UsageError"
    assert run.reply["content"]["evalue"].startswith("Cell magic `%%` not found")
    assert run.stream() == ""
