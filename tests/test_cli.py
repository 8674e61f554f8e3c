"""The `hostfinder` command as a person meets it: start-up paths, failures, admin subcommands."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest
import requests
from psycopg.rows import dict_row

from store import locks as leases
from tests.conftest import REPO, free_port, memory_dir

PY = sys.executable


def hostfinder(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "gateway", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # A traversable parent (as root the embedded server runs as another user), in memory where
    # the machine offers it (initdb and CREATE DATABASE write thousands of files).
    parent = Path(tempfile.mkdtemp(prefix="hostfinder-cli-", dir=memory_dir()))
    parent.chmod(0o755)
    yield parent / "data"
    subprocess.run(["rm", "-rf", str(parent)], check=False)


class Serve:
    """`hostfinder serve` in a subprocess, read line by line until it announces its URLs."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, terminal: bool = False) -> None:
        """``terminal``: in a process group of its own, as a shell runs a foreground command, so
        a test can send the group a Ctrl-C."""
        self.port = free_port()
        self.proc = subprocess.Popen([PY, "-m", "gateway", "serve", "--bind", f"127.0.0.1:{self.port}", *args],
                                     cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})}, start_new_session=terminal)
        self.url = f"http://localhost:{self.port}"

    def wait_ready(self, timeout: float) -> tuple[float, str]:
        start = time.monotonic()
        out = []
        while time.monotonic() - start < timeout:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"serve exited early: {self.proc.wait()} {self.proc.stderr.read()}")
            out.append(line)
            if line.startswith("Press Ctrl-C"):
                break
        r = requests.get(f"{self.url}/api/health", timeout=5)
        assert r.status_code == 200 and r.json()["ok"] is True
        return time.monotonic() - start, "".join(out)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=30)
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()


def postgres_processes(data_dir: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-af", str(data_dir)], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "postgres" in line and "pgrep" not in line]


def test_every_subcommand_has_help() -> None:
    commands = [[], ["serve"], ["migrate"], ["mount"], ["admin"], ["admin", "bootstrap"],
                ["admin", "org", "create"], ["admin", "guild", "create"], ["admin", "agent", "create"],
                ["admin", "agent", "set"], ["admin", "user", "create"], ["admin", "member", "add"],
                ["admin", "token", "create"], ["admin", "run", "create"], ["admin", "run", "set"],
                ["admin", "lock", "list"], ["admin", "lock", "remove"]]
    for cmd in commands:
        r = hostfinder(*cmd, "--help")
        assert r.returncode == 0, (cmd, r.stderr)
        assert "usage: hostfinder" in r.stdout


def test_first_run_creates_the_store_and_a_demo_and_restarts_fast(data_dir: Path) -> None:
    first = Serve("--data-dir", str(data_dir))
    try:
        took, out = first.wait_ready(timeout=30)
        assert f"{first.url}/dav/" in out and f"{first.url}/api/" in out
        # Output that is not a terminal (a pipe here; a log, a journal) gets no secret: the banner
        # names the file that keeps the demo's login instead.
        kept = data_dir.absolute() / "demo-login.txt"
        assert f"Log in as demo@hostfinder.local with the password in {kept}" in out
        email, password = kept.read_text().split()
        assert password not in out
        r = requests.request("PROPFIND", f"{first.url}/dav/", headers={"Depth": "1"}, auth=(email, password))
        assert r.status_code == 207
        # The printed address is the web app: its login form takes the demo login, and the demo's
        # table is on the Databases page.
        assert f"Web app (Databases, Notes, agents' State): {first.url}/ " in out
        web = requests.Session()
        assert 'name="email"' in web.get(f"{first.url}/").text
        r = web.post(f"{first.url}/login", data={"email": email, "password": password})
        assert r.status_code == 200 and ">leads</a>" in r.text
        # The demo shows every part of the tree straight away.
        dav = requests.Session()
        dav.auth = (email, password)
        assert dav.get(f"{first.url}/dav/org/1/welcome.md").text.startswith("# Welcome to Host Finder")
        assert "![[org/1/guilds/1/playbook.md]]" in dav.get(f"{first.url}/dav/org/1/agents/1/task.md").text
        assert dav.get(f"{first.url}/dav/org/1/agents/1/memory.md").status_code == 200
        assert dav.get(f"{first.url}/dav/org/1/agents/1/scripts/score_leads.py").status_code == 200
        leads = dav.get(f"{first.url}/dav/org/1/collections/leads/collection.json").json()
        assert leads["count"] == 12
        assert dav.get(f"{first.url}/dav/org/1/collections/leads/12.json").json()["company"] == "Aperture"
    finally:
        assert first.stop() == 0
    assert postgres_processes(data_dir) == [], "Ctrl-C/SIGTERM must leave no postgres process"

    second = Serve("--data-dir", str(data_dir))
    try:
        took, out = second.wait_ready(timeout=5)
        # A third gateway on the same directory would depend on this one's PostgreSQL (and answer
        # 503 for good once it stopped): refused, in one sentence.
        third = hostfinder("serve", "--bind", f"127.0.0.1:{free_port()}", "--data-dir", str(data_dir))
        assert third.returncode == 1 and "another Host Finder process already runs the PostgreSQL" in third.stderr
        assert "Traceback" not in third.stderr
        assert requests.get(f"{second.url}/api/health", timeout=5).status_code == 200
        # The demo is not created twice, and its login is still shown.
        assert f"Log in as {email} with the password in {kept}" in out and password not in out
        assert kept.read_text().split() == [email, password]
    finally:
        assert second.stop(signal.SIGINT) == 0
    assert postgres_processes(data_dir) == []


def test_two_gateways_started_together_on_a_new_directory_one_serves(data_dir: Path) -> None:
    """Both ran initdb into the same place and both failed; now one starts the store and the
    other, which would depend on it, says so in one sentence (also where the directory's parents
    do not exist yet, which the first one makes)."""
    data_dir = data_dir / "new" / "store"
    both = [Serve("--data-dir", str(data_dir), "--no-demo", "--workers", "1") for _ in range(2)]
    try:
        codes = []
        for s in both:
            try:
                s.wait_ready(timeout=60)
                codes.append("serving")
            except AssertionError as exc:
                codes.append(str(exc))
        assert sorted(codes)[-1] == "serving", codes
        refused = sorted(codes)[0]
        assert "another Host Finder process already runs the PostgreSQL" in refused, codes
        assert "Traceback" not in refused and "initdb" not in refused, refused
    finally:
        for s in both:
            s.stop()
    assert postgres_processes(data_dir) == []


def test_a_stale_postmaster_pid_does_not_block_the_next_start(data_dir: Path) -> None:
    r = hostfinder("migrate", "--data-dir", str(data_dir))
    assert r.returncode == 0, r.stderr
    pidfile = data_dir / "pgdata" / "postmaster.pid"
    assert not pidfile.exists()
    # What a killed run leaves behind: a pid file naming a process that no longer exists.
    dead = subprocess.Popen(["true"]); dead.wait()
    pidfile.write_text(f"{dead.pid}\n{data_dir / 'pgdata'}\n1700000000\n5432\n/tmp\n\n  5432001  0\nready\n")
    s = Serve("--data-dir", str(data_dir), "--no-demo")
    try:
        s.wait_ready(timeout=30)
    finally:
        assert s.stop() == 0


def test_database_url_uses_an_existing_server(pg_server: str, template_db: str, data_dir: Path) -> None:
    from tests.conftest import create_database, drop_database
    url = create_database(pg_server, "template0")
    try:
        s = Serve("--database-url", url, "--data-dir", str(data_dir))
        try:
            _, out = s.wait_ready(timeout=30)
            assert "Log in as demo@hostfinder.local" in out
        finally:
            assert s.stop() == 0
        assert not data_dir.exists(), "with a database URL nothing is created in the data directory"
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM organisations").fetchone()[0] == 1
        # The demo's password was printed once (no data directory keeps it): a restart says how
        # to set one.
        s = Serve("--database-url", url, "--data-dir", str(data_dir))
        try:
            _, out = s.wait_ready(timeout=30)
            assert "Log in as" not in out
            assert ("admin user set-password --email EMAIL --password '...' (with this --database-url)"
                    in out), out
        finally:
            assert s.stop() == 0
    finally:
        drop_database(pg_server, url)


@pytest.mark.parametrize("args, env, says", [
    (["--database-url", "postgresql://nobody@127.0.0.1:1/none"], {}, "cannot connect to the database at 127.0.0.1:1/none"),
    (["--database-url", "not a url at all"], {}, "is not a PostgreSQL URL"),
    (["--data-dir", "/proc/hostfinder"], {}, "cannot create data directory /proc/hostfinder"),
    ([], {"HOSTFINDER_PG_BINDIR": "/nonexistent/bin"}, "/nonexistent/bin"),
    (["--bind", "127.0.0.1:http"], {}, "is not HOST:PORT"),
    (["--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"], {}, "cannot read /nonexistent.pem"),
    (["--workers", "1", "--tls-cert", "/etc/passwd", "--tls-key", "/etc/passwd"], {}, "check --tls-cert and --tls-key"),
    (["--workers", "2", "--tls-cert", "/etc/passwd", "--tls-key", "/etc/passwd"], {}, "check --tls-cert and --tls-key"),
])
def test_start_up_failures_say_one_sentence_and_exit_1(args, env, says, data_dir: Path) -> None:
    if "--data-dir" not in args:
        args = [*args, "--data-dir", str(data_dir)]
    r = hostfinder("serve", "--bind", f"127.0.0.1:{free_port()}", *args, env=env, timeout=60)
    assert r.returncode == 1, r.stderr
    assert says in r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().startswith("hostfinder: ")


@pytest.mark.parametrize("command", [["admin", "token", "list"], ["mount", "{mountpoint}", "--user", "a@b.c"]],
                         ids=["admin", "mount"])
def test_admin_and_mount_on_a_directory_without_a_store_create_none(command: list[str], data_dir: Path,
                                                                    tmp_path: Path) -> None:
    """Run from the wrong directory, they say where they looked instead of creating an empty store
    there and reporting its emptiness ("unknown organisation 1")."""
    command = [c.format(mountpoint=tmp_path) for c in command]
    r = hostfinder(*command, "--data-dir", str(data_dir))
    assert r.returncode == 1, r.stderr
    assert f"there is no Host Finder store in {data_dir}" in r.stderr and "--data-dir" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (data_dir / "pgdata").exists()


def test_a_directory_that_holds_someone_elses_files_is_not_taken_over(data_dir: Path) -> None:
    """As root the data directory is handed to the server user with mode 0700: a home folder given
    as --data-dir (or "", the current directory) would lock its owner out."""
    data_dir.mkdir(mode=0o755)
    (data_dir / ".ssh").mkdir()
    (data_dir / "notes.txt").write_text("mine")
    before = data_dir.stat()
    for given in (str(data_dir), ""):
        r = hostfinder("serve", "--bind", f"127.0.0.1:{free_port()}", "--workers", "1", "--data-dir", given)
        assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "already holds files that are not Host Finder's (.ssh, notes.txt)" in hostfinder(
        "migrate", "--data-dir", str(data_dir)).stderr
    after = data_dir.stat()
    assert (after.st_mode, after.st_uid) == (before.st_mode, before.st_uid)
    assert sorted(p.name for p in data_dir.iterdir()) == [".ssh", "notes.txt"]
    # A store's own directory stays its own whatever is put beside it later (a disk's lost+found,
    # a backup); and a new store on a disk of its own, which holds only lost+found, is fine.
    store = data_dir.parent / "store"
    (store / "lost+found").mkdir(parents=True)
    assert hostfinder("migrate", "--data-dir", str(store)).returncode == 0
    (store / "backup.sql").write_text("-- a dump")
    r = hostfinder("migrate", "--data-dir", str(store))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args, says", [(["--workers", "0"], "--workers 0: give a number of processes from 1 to 15"),
                                        (["--workers", "500"], "--workers 500: give a number of processes from 1 to 15"),
                                        (["--threads", "-3"], "--threads -3: give a number of threads per worker")])
def test_numbers_out_of_range_are_one_sentence(args: list[str], says: str, data_dir: Path) -> None:
    r = hostfinder("serve", "--bind", f"127.0.0.1:{free_port()}", *args, "--data-dir", str(data_dir))
    assert r.returncode == 1 and says in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not data_dir.exists()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_fails_before_anything_is_created(data_dir: Path, workers: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = hostfinder("serve", "--bind", f"127.0.0.1:{port}", "--workers", workers, "--data-dir", str(data_dir))
    assert r.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in r.stderr and "--bind" in r.stderr
    assert "No socket could be created" not in r.stderr and "Traceback" not in r.stderr
    assert not data_dir.exists()
    r = hostfinder("serve", "--bind", "203.0.113.9:18080", "--workers", workers, "--data-dir", str(data_dir))
    assert r.returncode == 1 and "check the address in --bind" in r.stderr and "in use" not in r.stderr, r.stderr


def test_a_failed_first_initdb_leaves_nothing_that_blocks_the_next_try(data_dir: Path) -> None:
    # initdb fails when it cannot load its locale... simplest reliable failure: an unusable bindir.
    fake = data_dir.parent / "fakebin"
    fake.mkdir()
    for tool in ("initdb", "postgres", "pg_ctl"):
        (fake / tool).write_text("#!/bin/sh\necho broken >&2\nexit 1\n")
        (fake / tool).chmod(0o755)
    r = hostfinder("migrate", "--data-dir", str(data_dir), env={"HOSTFINDER_PG_BINDIR": str(fake)})
    assert r.returncode == 1 and "Traceback" not in r.stderr
    r = hostfinder("migrate", "--data-dir", str(data_dir))
    assert r.returncode == 0, r.stderr


def test_admin_commands_print_one_json_object(pg_server: str, template_db: str) -> None:
    from tests.conftest import create_database, drop_database
    url = create_database(pg_server, template_db)
    try:
        def admin(*args: str) -> dict:
            r = hostfinder("admin", *args, "--database-url", url)
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout)

        boot = admin("bootstrap", "--json")
        assert {"org_id", "guild_id", "agent_id", "email", "password", "member_token", "service_token"} <= boot.keys()
        org = admin("org", "create", "--name", "Acme")
        guild = admin("guild", "create", "--org", str(org["id"]), "--name", "Sales")
        agent = admin("agent", "create", "--org", str(org["id"]), "--guild", str(guild["id"]), "--name", "Closer",
                      "--task", "Close deals.", "--write-org", "--no-read-guild")
        assert (agent["read_guild"], agent["write_guild"], agent["read_org"], agent["write_org"]) == (False, True, True, True)
        agent = admin("agent", "set", str(agent["id"]), "--no-write-org")
        assert agent["write_org"] is False and agent["read_guild"] is False
        user = admin("user", "create", "--email", "bo@example.com", "--password", "a long password")
        assert "password" not in user and "password_hash" not in user
        admin("member", "add", "--org", str(org["id"]), "--email", "bo@example.com")
        token = admin("token", "create", "--org", str(org["id"]), "--member", "bo@example.com")
        assert token["token"].startswith("hf_") and token["kind"] == "member"
        service = admin("token", "create", "--org", str(org["id"]), "--service")
        assert service["kind"] == "service"
        run = admin("run", "create", "--agent", str(agent["id"]), "--kind", "schedule", "--routine", "morning")
        assert run["status"] == "running" and run["routine"] == "morning"
        assert admin("run", "set", str(run["id"]), "--status", "succeeded")["status"] == "succeeded"
        # An abandoned WebDAV lock (a client that crashed holding it) can be listed and ended.
        assert admin("lock", "list") == {"locks": []}
        note = f"org/{org['id']}/guilds/{guild['id']}/plan.md"
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            leases.create(conn, "opaquelocktoken:abandoned", note,
                          {"depth": "0", "scope": "exclusive", "principal": "bo@example.com"},
                          datetime.now(timezone.utc) + timedelta(weeks=4))
        held = admin("lock", "list", "--under", f"org/{org['id']}")["locks"]
        assert [(x["path"], x["holder"]) for x in held] == [(note, "bo@example.com")]
        assert "token" not in held[0] and "opaquelocktoken" not in json.dumps(held)
        # As a person pastes it from a WebDAV client: the URL, its name percent-encoded.
        pasted = f"http://localhost:8080/dav/org/{org['id']}/guilds/{guild['id']}/pl%61n.md"
        assert admin("lock", "list", "--under", f"/dav/org/{org['id']}/")["locks"] == held
        assert admin("lock", "remove", pasted) == {"removed": 1, "path": note}
        assert admin("lock", "list") == {"locks": []}
        # Under a note: its own locks and a depth-infinity lock on a folder above, which stops a
        # change of it too; not a depth-0 lock on a folder above, which does not.
        guild_folder = f"org/{org['id']}/guilds/{guild['id']}"
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            for token, path, depth in (("deep", guild_folder, "infinity"), ("shallow", f"org/{org['id']}", "0"),
                                       ("own", note, "0")):
                leases.create(conn, f"opaquelocktoken:{token}", path,
                              {"depth": depth, "scope": "exclusive", "principal": "bo@example.com"},
                              datetime.now(timezone.utc) + timedelta(weeks=4))
        held = admin("lock", "list", "--under", note)["locks"]
        assert sorted((x["path"], x["depth"]) for x in held) == [(guild_folder, "infinity"), (note, "0")]
        assert len(admin("lock", "list")["locks"]) == 3
        assert admin("lock", "remove", f"org/{org['id']}")["removed"] == 3

        # Names and logins a person can get wrong: one sentence each, nothing half made.
        def orgs() -> int:
            with psycopg.connect(url) as conn:
                return conn.execute("SELECT count(*) FROM organisations").fetchone()[0]
        before = orgs()
        for args, says in ((["org", "create", "--name", ""], "give the organisation a name of 1 to 200 characters"),
                           (["guild", "create", "--org", str(org["id"]), "--name", "   "],
                            "give the guild a name of 1 to 200 characters"),
                           (["agent", "create", "--org", str(org["id"]), "--guild", str(guild["id"]),
                             "--name", "x" * 201], "give the agent a name of 1 to 200 characters; got 201"),
                           (["bootstrap", "--email", "", "--password", ""], "'' is not an email address")):
            r = hostfinder("admin", *args, "--database-url", url)
            assert r.returncode == 1 and says in r.stderr and "constraint" not in r.stderr, (args, r.stderr)
        assert orgs() == before
        r = hostfinder("admin", "member", "add", "--org", str(org["id"]), "--email", "ghost@example.com",
                       "--database-url", url)
        assert r.returncode == 1 and "no user has the email ghost@example.com" in r.stderr
        r = hostfinder("admin", "user", "create", "--email", "bo@example.com", "--password", "another one!",
                       "--database-url", url)
        assert r.returncode == 1 and "already exists" in r.stderr and "Traceback" not in r.stderr
    finally:
        drop_database(pg_server, url)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's server runs as another user")
def test_as_root_a_default_data_dir_the_server_user_cannot_reach_moves_to_var_lib() -> None:
    private = Path(tempfile.mkdtemp(prefix="hostfinder-private-"))  # mode 0700, like /root
    try:
        r = subprocess.run([PY, "-m", "gateway", "migrate"], cwd=private, capture_output=True, text=True,
                           timeout=60, env={k: v for k, v in os.environ.items() if k != "HOSTFINDER_DATA_DIR"})
        assert r.returncode == 0, r.stderr
        assert "keeping the embedded data in /var/lib/hostfinder/" in r.stderr
        assert not (private / ".hostfinder").exists()
    finally:
        subprocess.run(["rm", "-rf", str(private)], check=False)
        slug = str(private).strip("/").replace("/", "-") + "-.hostfinder"
        subprocess.run(["rm", "-rf", f"/var/lib/hostfinder/{slug}"], check=False)


def test_tls_serves_https_with_the_given_certificate(data_dir: Path) -> None:
    data_dir.parent.joinpath("tls").mkdir()
    cert, key = data_dir.parent / "tls" / "cert.pem", data_dir.parent / "tls" / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    s = Serve("--data-dir", str(data_dir), "--no-demo", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        start = time.monotonic()
        line = ""
        while not line.startswith("Host Finder is serving"):
            line = s.proc.stdout.readline()
            assert line and time.monotonic() - start < 30, s.proc.stderr.read()
        assert line.strip() == f"Host Finder is serving on https://localhost:{s.port}"
        r = requests.get(f"https://localhost:{s.port}/api/health", verify=str(cert), timeout=5)
        assert r.status_code == 200 and r.json()["ok"] is True
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(f"http://localhost:{s.port}/api/health", timeout=5)
    finally:
        assert s.stop() == 0


def test_ctrl_c_stops_the_gateway_before_its_postgresql(data_dir: Path) -> None:
    """A terminal's Ctrl-C goes to the whole foreground process group: the gateway's PostgreSQL
    must not take it too and shut down under the workers, which then warned that their login
    channel was down while stopping cleanly."""
    serve = Serve("--data-dir", str(data_dir), "--no-demo", "--workers", "2", terminal=True)
    try:
        serve.wait_ready(120)
        os.killpg(serve.proc.pid, signal.SIGINT)
        assert serve.proc.wait(timeout=30) == 0
        stderr = serve.proc.stderr.read()
    finally:
        serve.stop()
    assert "WARNING" not in stderr and "ERROR" not in stderr, stderr
    assert postgres_processes(data_dir) == []


def test_an_embedded_postgresql_that_is_killed_is_started_again(data_dir: Path) -> None:
    """The gateway's own PostgreSQL killed (the OOM killer, an operator's kill -9): requests answer
    503 at once meanwhile, the gateway starts it again by itself, and requests succeed after."""
    serve = Serve("--data-dir", str(data_dir), "--no-demo", "--workers", "2")
    try:
        serve.wait_ready(120)
        postmaster = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGKILL)
        answers, healed_at, started = [], None, time.monotonic()
        while time.monotonic() - started < 60:
            t = time.monotonic()
            r = requests.get(f"{serve.url}/api/health", timeout=10)
            answers.append((r.status_code, time.monotonic() - t))
            if r.status_code == 200 and len(answers) > 1:
                healed_at = time.monotonic() - started
                break
            time.sleep(0.2)
        assert healed_at is not None, answers[-5:]
        assert all(elapsed < 3 for status, elapsed in answers if status == 503), answers
        new_postmaster = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
        assert new_postmaster != postmaster
    finally:
        assert serve.stop() == 0
    assert postgres_processes(data_dir) == []


def test_mount_names_the_fuse_libraries_only_when_they_are_what_is_missing(monkeypatch, tmp_path: Path) -> None:
    """`hostfinder mount` told users to install fuse3 and libfuse3-dev for any ImportError, even
    one of the project's own modules, where installing them changes nothing."""
    from gateway import cli
    args = cli.build_parser().parse_args(["mount", str(tmp_path), "--user", "a@example.com"])
    for name in [m for m in sys.modules if m == "fuse_mount" or m.startswith("fuse_mount.")]:
        monkeypatch.delitem(sys.modules, name)   # imported afresh below; restored after the test
    monkeypatch.setitem(sys.modules, "fuse_mount.command", None)   # the project's own module, unimportable
    with pytest.raises(ImportError) as raised:
        cli.cmd_mount(args)
    assert raised.value.name == "fuse_mount.command"
    monkeypatch.delitem(sys.modules, "fuse_mount.command")
    monkeypatch.setitem(sys.modules, "pyfuse3", None)            # the library: the sentence says what to install
    with pytest.raises(cli.CommandError, match="install fuse3, libfuse3-dev and pkg-config"):
        cli.cmd_mount(args)
