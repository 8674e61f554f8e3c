"""The suite's own housekeeping: a run stopped by SIGTERM gives back what it took.

The session's PostgreSQL keeps its data in /dev/shm (memory); a run killed outright left a
directory there and a server running, run after run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_run_ended_by_sigterm_stops_its_postgresql_and_removes_its_data(tmp_path: Path) -> None:
    (tmp_path / "test_wait.py").write_text(
        "import time\n\n"
        "def test_wait(pg_server):\n"
        "    print('STARTED', flush=True)\n"
        "    time.sleep(120)\n")
    env = {k: v for k, v in os.environ.items() if k != "HOSTFINDER_TEST_DATABASE_URL"}
    out = tmp_path / "out.txt"
    before = _test_servers()
    with out.open("wb") as sink:
        run = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-s", "-q",
                                str(tmp_path / "test_wait.py"), "--rootdir", str(tmp_path)],
                               cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while b"STARTED" not in out.read_bytes():
                assert run.poll() is None and time.monotonic() < deadline, out.read_text()
                time.sleep(0.2)
            started = _test_servers() - before
            assert len(started) == 1, started  # the child's own server, found by its data directory
            data_dir = Path(started.pop())
            assert data_dir.is_dir()
            run.send_signal(signal.SIGTERM)
            assert run.wait(timeout=30) != 0
        finally:
            if run.poll() is None:
                run.kill()
    assert not data_dir.exists(), out.read_text()
    assert str(data_dir) not in _test_servers()


def _test_servers() -> set[str]:
    """Data directories of the test PostgreSQL servers running now (from their command lines)."""
    found = set()
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmd.read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"postgres") and b"-D" in args:
            pgdata = Path(args[args.index(b"-D") + 1].decode(errors="replace"))
            found.update(str(p) for p in (pgdata, *pgdata.parents) if p.name.startswith("hostfinder-test-pg-"))
    return found
