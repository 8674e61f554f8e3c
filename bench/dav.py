"""The Host Finder over WebDAV beside plain files (WsgiDAV's FilesystemProvider), as ratios.

    .venv/bin/python -m bench.dav [--notes 10000] [--creates 10000] [--runs 3] [--peer rclone] [--peer floor] [--no-fsync]

Measured the way a user runs it: `hostfinder serve --database-url URL --no-demo` in its own
process with its default options (workers = cores, 16 threads each, no read cache), over a guild
that already holds ``--notes`` notes of 1-4 KB. The reference is WsgiDAV's FilesystemProvider
serving the same notes from disk, in a process of its own, on cheroot as the `wsgidav` command
runs it (50 threads; lock and property managers), with the same Basic login. ``--peer rclone`` adds
`rclone serve webdav` over the same directory, same login. ``--peer floor`` adds Host Finder's own
HTTP layer with nothing behind it: the door (gateway/door.py) in as many worker processes and
threads as `serve` starts, in front of a WSGI app that keeps the notes in a dict and answers each
request with the least work (serve_floor): its ratio is what any application on this door and this
client scores, the part of every Host Finder ratio that the store does not decide. Each run measures every target in turn
(interleaved), ``--runs`` times; each figure is printed as the cost ratio target / reference per
run (below 1.0 = faster than the reference), then the range over the runs, and then the seconds
behind every ratio. The client is
http.client on keep-alive connections (bench.dav.Client): it costs little per request, so the
ratios show the servers (with requests' Session, the client's own cost was most of each request
and pulled every ratio toward 1.0).

Figures (the issue 14 table): creating ``--creates`` notes by PUT into an empty folder (and, for
Host Finder, the last 10 % of those creates against the first 10 %: flat means the 10 000th create
costs what the first did), 1 000 PUT overwrites, 1 000 sequential GETs on one connection, 2 000
GETs from 16 concurrent connections, PROPFIND Depth 1 of the full folder with named properties
and with allprop. Uses HOSTFINDER_BENCH_DATABASE_URL when set, else a private PostgreSQL that
flushes every commit to disk as the embedded one of `hostfinder serve` does (a save is durable when
its 201 is sent; the reference's files are not flushed, as WsgiDAV never does); ``--no-fsync``
runs it with fsync off, as the test suite does, to see the rest of a write's cost.

    .venv/bin/python -m bench.dav --scaling [--runs 3]

Whether concurrent GETs scale with `serve --workers`: 6 000 GETs by 16 curl processes at once,
each reading its own 375 notes on one keep-alive connection (a C client: the Python client of the
figures above needs a core of its own on a 2-core machine, and then measures itself; and 16
clients with a share each, as there, so a client whose worker is crowded finishes last and the
run waits for it), against `--workers 1`, `--workers 2`, the reference (and `--peer rclone`) in
turn, each run; prints requests per second, each process's CPU seconds, and the cost ratio of
each target to the reference.

    .venv/bin/python -m bench.dav --cpu [--runs 3]

Where a request's time goes: the CPU each process spends per request, for 2 000 creates, 1 000
overwrites and 2 000 GETs on one connection, against `hostfinder serve` with its default options
(the gateway's processes, and PostgreSQL's: the request's backend, the search indexer's, the WAL
writer; the indexer's niced backend also apart, as "of it the indexer") and the reference (its
one process), with the client's own. Work a request leaves behind
counts as its own: a phase's CPU is read once the search indexer has emptied its queue. Wall time
per request is the phase's alone; a request's CPU above its wall time means two cores worked on it.
"""
from __future__ import annotations

import argparse
import base64
import http.client
import itertools
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

REPO = Path(__file__).resolve().parent.parent
USER, PASSWORD = "bench@example.com", "bench password"
CLIENTS = 16
NAMED = (b'<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/>'
         b'<D:getcontentlength/><D:getlastmodified/><D:getetag/><D:getcontenttype/></D:prop></D:propfind>')
ALLPROP = b'<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(app: Any, threads: int) -> tuple[str, Any]:
    """A cheroot server for ``app`` in a thread of this process (bench/scale.py)."""
    from gateway.server import make_server
    port = free_port()
    server = make_server(app, "127.0.0.1", port, threads=threads)
    server.prepare()
    threading.Thread(target=server.serve, daemon=True).start()
    return f"http://127.0.0.1:{port}", server


# Notes read like prose to the search index: words of a fixed 20 000-word vocabulary drawn with
# the frequencies of natural language (Zipf's law: a few words in most notes, most words in few).
# Until 3 December every note repeated one sentence of eight distinct words, so its index entries
# cost a fraction of what a real note's do (issue 14: 143 KB of WAL a note for prose, directly).
_VOCABULARY = ["".join(random.Random(w).choices("abcdefghijklmnopqrstuvwxyz", k=3 + w % 8)) for w in range(20_000)]
_ZIPF = list(itertools.accumulate(1 / rank for rank in range(1, len(_VOCABULARY) + 1)))


def note(i: int) -> str:
    """A note of 1-4 KB of prose-like text, the same for the same ``i``."""
    words = random.Random(i).choices(_VOCABULARY, cum_weights=_ZIPF, k=150 + (i * 37) % 400)
    return f"# note {i}\n\n" + " ".join(words) + "\n"


def seed(db: Any, notes: int) -> tuple[dict[str, Any], str]:
    """The benchmark's login and a guild holding ``notes`` notes n1.md.. of 1-4 KB (``note``):
    (the bootstrap's ids, the guild's folder path), their search vectors filled as the gateway's
    indexer would have filled them by then, vacuumed and analysed as autovacuum would."""
    from store import admin, search_index
    boot = admin.bootstrap(db, email=USER, password=PASSWORD)
    folder = f"org/{boot['org_id']}/guilds/{boot['guild_id']}"
    with db.transaction() as conn:
        conn.execute("""INSERT INTO artifacts (org_id, kind, level, guild_id, key, display_path, content)
                        SELECT %s, 'note', 'guild', %s, 'n' || i || '.md', %s || 'n' || i || '.md', c
                          FROM unnest(%s::int[], %s::text[]) AS t(i, c)""",
                     (boot["org_id"], boot["guild_id"], folder + "/", list(range(1, notes + 1)),
                      [note(i) for i in range(1, notes + 1)]))
    with db.connection() as conn:
        search_index.index_pending(conn, batch=1000)
        conn.execute("VACUUM ANALYZE")
    return boot, folder


def seed_files(folder: str, notes: int) -> Path:
    """A new temporary directory holding the same notes as ``seed`` at the same path."""
    root = Path(tempfile.mkdtemp(prefix="hostfinder-bench-files-"))
    (root / folder).mkdir(parents=True)
    for i in range(1, notes + 1):
        (root / folder / f"n{i}.md").write_text(note(i))
    return root


def _files_app(root: Path) -> Any:
    from wsgidav.fs_dav_provider import FilesystemProvider
    from wsgidav.wsgidav_app import WsgiDAVApp
    return WsgiDAVApp({
        "provider_mapping": {"/": FilesystemProvider(str(root))},
        "http_authenticator": {"domain_controller": None, "accept_basic": True, "accept_digest": False,
                               "default_to_digest": False},
        "simple_dc": {"user_mapping": {"*": {USER: {"password": PASSWORD}}}},
        "verbose": 1, "logging": {"enable": False}, "dir_browser": {"enable": False},
        "lock_storage": True, "property_manager": True,
    })


def serve_files(root: str, port: int) -> None:
    """The reference server (run in its own process by this benchmark), served as the `wsgidav`
    command serves it (wsgidav/server/server_cli.py, _run_cheroot): cheroot's own wsgi.Server
    with 50 threads. Not Host Finder's door: how fast the gateway's HTTP layer is is part of
    what a user compares."""
    from cheroot import wsgi
    server = wsgi.Server(("127.0.0.1", port), _files_app(Path(root)), numthreads=50)
    server.prepare()
    server.serve()


class FloorApp:
    """The floor peer's application: the notes under ``root`` read into a dict at start, a GET
    answered from it, a PUT stored into it (201 or 204), a PROPFIND of a folder answered with
    the named properties of its files, one string join; the login compared as a header string. No
    disk, no database, no WebDAV library: what is left of a request is the HTTP layer and the
    client."""

    AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    def __init__(self, root: Path) -> None:
        self.files = {"/" + str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.md")}
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("HTTP_AUTHORIZATION") != self.AUTH:
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="floor"'), ("Content-Length", "0")])
            return [b""]
        method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
        if method == "GET":
            body = self.files.get(path)
            if body is None:
                start_response("404 Not Found", [("Content-Length", "0")])
                return [b""]
            start_response("200 OK", [("Content-Type", "text/markdown"), ("Content-Length", str(len(body))),
                                      ("ETag", f'"{len(body)}"')])
            return [body]
        if method == "PUT":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            with self.lock:
                existed = path in self.files
                self.files[path] = body
            start_response("204 No Content" if existed else "201 Created", [("Content-Length", "0")])
            return [b""]
        if method == "PROPFIND":
            environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            folder = path.rstrip("/") + "/"
            with self.lock:
                names = [(p, len(b)) for p, b in self.files.items() if p.startswith(folder)]
            body = ('<?xml version="1.0" encoding="utf-8"?><D:multistatus xmlns:D="DAV:">' + "".join(
                f"<D:response><D:href>{p}</D:href><D:propstat><D:prop><D:resourcetype/>"
                f"<D:getcontentlength>{n}</D:getcontentlength><D:getcontenttype>text/markdown"
                f"</D:getcontenttype><D:getetag>\"{n}\"</D:getetag></D:prop>"
                "<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>" for p, n in names)
                + "</D:multistatus>").encode()
            start_response("207 Multi-Status", [("Content-Type", "application/xml; charset=utf-8"),
                                                ("Content-Length", str(len(body)))])
            return [body]
        start_response("200 OK", [("DAV", "1"), ("Content-Length", "0")])  # OPTIONS, the readiness probe
        return [b""]


def serve_floor(root: str, port: int) -> None:
    """The floor peer's server (run in its own process by this benchmark): FloorApp behind
    Host Finder's door, in `serve`'s default number of worker processes (sharing one listening
    socket and spreading connections as gateway/workers.py's do) and threads, until SIGTERM."""
    import signal

    from gateway.balance import Balance
    from gateway.config import Config
    from gateway.server import make_server
    from gateway.workers import adopt, default_workers, listen

    threads, workers = Config().threads, default_workers()
    app = FloorApp(Path(root))  # read once; each worker gets its own copy at the fork
    sock = listen(make_server(app, "127.0.0.1", port))
    balance = Balance(workers)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    children = []
    for number in range(workers):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
            server = make_server(app, "127.0.0.1", port, threads=threads)
            adopt(server, sock, balance)
            server.prepare()
            balance.serve_as(number)
            server.serve()
            os._exit(0)
        children.append(pid)
    while not stop.wait(0.2):
        pass
    for pid in children:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)


def _here(serve: Callable[[str, int], None], root: Path, port: int, env: dict[str, str]) -> subprocess.Popen:
    """``serve`` (serve_files or serve_floor of this module) over ``root`` in a process of its own."""
    return subprocess.Popen([sys.executable, "-c", f"from bench.dav import {serve.__name__}; "
                             f"{serve.__name__}({str(root)!r}, {port})"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Target:
    def __init__(self, name: str, base: str, folder: str, new_folder: Callable[[int], str],
                 proc: subprocess.Popen) -> None:
        self.name, self.base, self.folder, self.new_folder, self.proc = name, base, folder, new_folder, proc


def _wait_up(url: str, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{url}: the server exited ({proc.returncode})")
        try:
            requests.request("OPTIONS", url, auth=(USER, PASSWORD), timeout=2)
            return
        except requests.ConnectionError:
            time.sleep(0.2)
    raise SystemExit(f"{url}: the server did not come up")


class Client:
    """One keep-alive connection with the benchmark's Basic login, on http.client: a client that
    costs little per request (requests costs several times more), so the ratios show the servers
    rather than the client."""

    AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    def __init__(self, base: str) -> None:
        self.conn = http.client.HTTPConnection(urlsplit(base).netloc, timeout=120)

    def request(self, method: str, url: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        self.conn.request(method, urlsplit(url).path, body=body, headers={"Authorization": self.AUTH, **(headers or {})})
        answer = self.conn.getresponse()
        return answer.status, answer.read()

    def put(self, url: str, data: bytes) -> int:
        return self.request("PUT", url, data)[0]

    def get(self, url: str) -> int:
        return self.request("GET", url)[0]


def measure(t: Target, notes: int, creates: int, run: int) -> dict[str, float]:
    s = Client(t.base)
    url = f"{t.base}/{t.folder}"
    assert s.get(f"{url}/n1.md") == 200
    out: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> None:
        started = time.perf_counter()
        fn()
        out[name] = time.perf_counter() - started

    # Creates: the per-request times are kept to compare the last creates with the first.
    target = f"{t.base}/{t.new_folder(run)}"
    stamps: list[float] = []
    # (Made before the clock starts: drawing a note's words costs the client about 0.2 ms.)
    bodies = [note(i).encode() for i in range(1, creates + 1)]
    rewrites = [note(i + run).encode() for i in range(1, 1001)]

    def create() -> None:
        for i in range(1, creates + 1):
            started = time.perf_counter()
            status = s.put(f"{target}/c{i}.md", bodies[i - 1])
            assert status == 201, (t.name, status)
            stamps.append(time.perf_counter() - started)
    timed(f"creating {creates:,} notes by PUT", create)
    tenth = max(1, creates // 10)
    out["_last/first creates"] = sum(stamps[-tenth:]) / max(sum(stamps[:tenth]), 1e-9)

    def overwrite() -> None:
        for i in range(1, 1001):
            status = s.put(f"{url}/n{i}.md", rewrites[i - 1])
            assert status in (201, 204), (t.name, status)
    timed("PUT overwrite, sequential (1 000)", overwrite)

    def gets() -> None:
        for i in range(1, 1001):
            assert s.get(f"{url}/n{i}.md") == 200
    timed("GET, sequential, one connection (1 000)", gets)

    def concurrent() -> None:
        def client(k: int) -> None:
            c = Client(t.base)
            for i in range(k, 2000, CLIENTS):
                assert c.get(f"{url}/n{1 + (i * 7) % notes}.md") == 200
        threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    timed(f"GET, {CLIENTS} concurrent connections (2 000)", concurrent)

    for label, body in (("named properties", NAMED), ("allprop", ALLPROP)):
        def propfind(body: bytes = body) -> None:
            status, _ = s.request("PROPFIND", url + "/", body, {"Depth": "1", "Content-Type": "application/xml"})
            assert status == 207, (t.name, status)
        timed(f"PROPFIND depth 1, {label}", propfind)
    return out


class Targets:
    """The servers a run measures, seeded and started: Host Finder (`hostfinder serve`, its default
    options unless ``workers``) over a guild of ``notes`` notes, with one empty guild per run for
    the creates, and the reference (and ``peers``) over the same notes as files. A context manager:
    leaving it stops them all and removes the files."""

    def __init__(self, conninfo: str, notes: int, runs: int, peers: list[str], workers: int | None = None) -> None:
        from store import admin
        from store.db import Database

        db = Database(conninfo, max_size=4).open()
        boot, self.folder = seed(db, notes)
        org = boot["org_id"]
        guilds = [admin.create_guild(db, org_id=org, name=f"creates {r}")["id"] for r in range(runs)]
        db.close()
        self.root = seed_files(self.folder, notes)
        for target in ("files", *peers):
            for r in range(runs):
                (self.root / f"{target}-creates-{r}").mkdir()
        self.procs: list[subprocess.Popen] = []
        self.all: list[Target] = []
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        folder = self.folder
        try:
            port = free_port()
            self.hf = self._started(subprocess.Popen(
                [sys.executable, "-m", "gateway", "serve", "--database-url", conninfo, "--no-demo",
                 "--bind", f"127.0.0.1:{port}", *(["--workers", str(workers)] if workers else [])],
                cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self.all.append(Target("Host Finder", f"http://127.0.0.1:{port}/dav", folder,
                                   lambda r: f"org/{org}/guilds/{guilds[r]}", self.hf))
            port = free_port()
            ref = self._started(_here(serve_files, self.root, port, env))
            self.all.append(Target("files", f"http://127.0.0.1:{port}", folder, lambda r: f"files-creates-{r}", ref))
            if "rclone" in peers:
                port = free_port()
                rc = self._started(subprocess.Popen(
                    ["rclone", "serve", "webdav", str(self.root), "--addr", f"127.0.0.1:{port}",
                     "--user", USER, "--pass", PASSWORD], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                self.all.append(Target("rclone", f"http://127.0.0.1:{port}", folder,
                                       lambda r: f"rclone-creates-{r}", rc))
            if "floor" in peers:
                port = free_port()
                fl = self._started(_here(serve_floor, self.root, port, env))
                self.all.append(Target("floor", f"http://127.0.0.1:{port}", folder,
                                       lambda r: f"floor-creates-{r}", fl))
            for t in self.all:
                _wait_up(f"{t.base}/", t.proc)
        except BaseException:
            self.close()
            raise

    def _started(self, proc: subprocess.Popen) -> subprocess.Popen:
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Targets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run(conninfo: str, notes: int, creates: int, runs: int, peers: list[str], workers: int | None = None) -> None:
    with Targets(conninfo, notes, runs, peers, workers) as targets:
        results: list[dict[str, dict[str, float]]] = []
        for r in range(runs):
            results.append({t.name: measure(t, notes, creates, r) for t in targets.all})
            print(f"run {r + 1}/{runs} done", file=sys.stderr, flush=True)
    report(results, [t.name for t in targets.all])


def report(results: list[dict[str, dict[str, float]]], names: list[str]) -> None:
    others = [n for n in names if n != "files"]
    figures = [f for f in results[0]["files"] if not f.startswith("_")]
    head = "".join(f" {n + ' (runs)':>24} {'range':>11}" for n in others)
    print(f"{'figure':42} {'files (s)':>10}{head}")
    for f in figures:
        line = f"{f:42} {min(r['files'][f] for r in results):10.3f}"
        for n in others:
            ratios = [r[n][f] / r["files"][f] for r in results]
            line += f" {' '.join(f'{x:.2f}' for x in ratios):>24} {min(ratios):5.2f}–{max(ratios):.2f}"
        print(line)
    flat = [r["Host Finder"]["_last/first creates"] for r in results]
    print(f"{'Host Finder: last 10 % of creates / first 10 %':42} {'':10} {' '.join(f'{x:.2f}' for x in flat):>24}")
    print("(ratio = target time / files time in the same run; below 1.0 = faster than the reference; "
          "files (s) = the reference's best time)")
    # The seconds behind the ratios: a ratio can move because the reference's run did (its first
    # run of creates into a new directory is slow), and a target can slow down from run to run.
    print("\nseconds per run:")
    for f in figures:
        print(f"{f:42} " + " | ".join(f"{n} {' '.join(f'{r[n][f]:.3f}' for r in results)}" for n in names))


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command's name (field 3 onwards), or None once it has ended."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (0 once it has ended)."""
    fields = _stat_fields(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _niced(pid: int) -> bool:
    """Whether a process runs below the normal CPU priority: among PostgreSQL's processes, the
    search indexer's backend (store.search_index lowers its priority when it may)."""
    fields = _stat_fields(pid)
    return fields is not None and int(fields[16]) > 0


def scaling(conninfo: str, runs: int, peer: str | None = None, notes: int = 500, gets: int = 6000) -> None:
    from store.db import Database

    if shutil.which("curl") is None:
        raise SystemExit("--scaling: curl is not installed")
    db = Database(conninfo, max_size=2).open()
    _, folder = seed(db, notes)
    db.close()
    root = seed_files(folder, notes)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    servers: dict[str, tuple[subprocess.Popen, str]] = {}
    rates: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="hostfinder-bench-curl-") as lists:
        try:
            for workers in (1, 2):
                port = free_port()
                proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--database-url", conninfo,
                                         "--no-demo", "--bind", f"127.0.0.1:{port}", "--workers", str(workers)],
                                        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                servers[f"--workers {workers}"] = (proc, f"http://127.0.0.1:{port}/dav/{folder}")
            port = free_port()
            proc = _here(serve_files, root, port, env)
            servers["files"] = (proc, f"http://127.0.0.1:{port}/{folder}")
            if peer == "rclone":
                port = free_port()
                proc = subprocess.Popen(["rclone", "serve", "webdav", str(root), "--addr", f"127.0.0.1:{port}",
                                         "--user", USER, "--pass", PASSWORD], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
                servers["rclone"] = (proc, f"http://127.0.0.1:{port}/{folder}")
            for proc, base in servers.values():
                _wait_up(base + "/", proc)
            time.sleep(1.0)  # every worker up
            for r in range(runs):
                for label, (proc, base) in servers.items():
                    configs = []
                    for k in range(CLIENTS):
                        configs.append(Path(lists) / f"client-{k}.curl")
                        configs[-1].write_text("".join(f'url = "{base}/n{1 + (i * 7) % notes}.md"\n'
                                                       'output = "/dev/null"\n' for i in range(k, gets, CLIENTS)))
                    pids = _children(proc.pid) or [proc.pid]
                    before = {p: _cpu_seconds(p) for p in pids}
                    started = time.perf_counter()
                    clients = [subprocess.Popen(["curl", "-s", "-u", f"{USER}:{PASSWORD}", "-w", "%{http_code}\n",
                                                 "-K", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                text=True) for cfg in configs]
                    outs = [c.communicate() for c in clients]
                    took = time.perf_counter() - started
                    answered = sum(out.split().count("200") for out, _ in outs)
                    assert answered == gets, (label, answered, outs[0][1][:300])
                    cpu = " ".join(f"{_cpu_seconds(p) - before[p]:.2f}" for p in pids)
                    rates.setdefault(label, []).append(gets / took)
                    print(f"run {r + 1}, {label:12}: {gets / took:6.0f} GETs/s "
                          f"({gets:,} over {CLIENTS} connections in {took:.2f} s); CPU s per process: {cpu}")
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(30)
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nGET, {CLIENTS} concurrent connections by curl: cost ratio to files (files' rate / the target's, "
          "per run; below 1.0 = faster than the reference)")
    for label in rates:
        if label != "files":
            ratios = [f / t for f, t in zip(rates["files"], rates[label])]
            print(f"  {('Host Finder ' + label) if label.startswith('--') else label:26} "
                  f"{' '.join(f'{x:.2f}' for x in ratios)}")


def _children(pid: int) -> list[int]:
    return [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()]


def _postmaster(conninfo: str) -> int | None:
    """The PostgreSQL server's postmaster (from postmaster.pid in its data directory, when this
    user can read it); None when the server is elsewhere."""
    import psycopg

    with psycopg.connect(conninfo) as conn:
        data_dir = conn.execute("SHOW data_directory").fetchone()[0]  # type: ignore[index]
    try:
        return int(Path(data_dir, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _queue_empty(conninfo: str, timeout: float = 60.0) -> None:
    """Wait until the search indexer has taken every queued note (then a moment for its merge)."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(conninfo, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if not conn.execute("SELECT EXISTS (SELECT FROM note_index_queue)").fetchone()[0]:  # type: ignore[index]
                break
            time.sleep(0.1)
    time.sleep(0.5)


def cpu_per_request(conninfo: str, runs: int, notes: int) -> None:
    bodies = [note(i).encode() for i in range(1, 2001)]
    postmaster = _postmaster(conninfo)   # (None when the server runs elsewhere: its CPU is not seen here)
    with Targets(conninfo, notes, runs, []) as targets:
        time.sleep(1.0)  # every worker up
        for r in range(runs):
            for t in targets.all:
                client = Client(t.base)
                # Each group's processes are listed again after a phase: one started meanwhile (a
                # new pooled connection's backend) counts whole.
                groups: dict[str, Callable[[], list[int]]] = {
                    "server": lambda t=t: [t.proc.pid, *_children(t.proc.pid)]}
                if t.proc is targets.hf and postmaster is not None:
                    # The search indexer's backend apart from the rest (the requests' backends,
                    # the WAL writer, the checkpointer, autovacuum): it is the niced one.
                    groups["PostgreSQL"] = lambda: [postmaster, *(p for p in _children(postmaster) if not _niced(p))]
                    groups["of it the indexer"] = lambda: [p for p in _children(postmaster) if _niced(p)]
                url, target = f"{t.base}/{t.folder}", f"{t.base}/{t.new_folder(r)}"
                phases: list[tuple[str, int, Callable[[int], int], int]] = [
                    ("create", 2000, lambda i: client.put(f"{target}/c{i}.md", bodies[i]), 201),
                    ("overwrite", 1000, lambda i: client.put(f"{url}/n{i + 1}.md", bodies[(i + 7 * r + 1) % 2000]), 204),
                    ("GET", 2000, lambda i: client.get(f"{url}/n{i % notes + 1}.md"), 200)]
                for name, count, request, expected in phases:
                    before = {g: {p: _cpu_seconds(p) for p in pids()} for g, pids in groups.items()}
                    own = time.process_time()
                    started = time.perf_counter()
                    for i in range(count):
                        assert request(i) == expected, (t.name, name, i)
                    wall = time.perf_counter() - started
                    own = time.process_time() - own
                    if t.proc is targets.hf:
                        _queue_empty(conninfo)
                    spent = {g: sum(_cpu_seconds(p) - before[g].get(p, 0.0) for p in pids()) / count * 1e6
                             for g, pids in groups.items()}
                    indexer = spent.get("of it the indexer")
                    if indexer is not None:   # (printed as a part of PostgreSQL's, whose figure holds it)
                        spent["PostgreSQL"] += indexer
                    total = own / count * 1e6 + sum(v for g, v in spent.items() if g != "of it the indexer")
                    print(f"run {r + 1}, {t.name:11} {name:9}: {wall / count * 1e6:5.0f} us wall a request; CPU us "
                          f"a request: client {own / count * 1e6:4.0f}, "
                          + ", ".join(f"{g} {v:4.0f}" for g, v in spent.items()) + f"; all {total:4.0f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--creates", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--peer", choices=["rclone", "floor"], action="append", default=[],
                        help="add `rclone serve webdav` over the same files, or Host Finder's door with "
                             "nothing behind it (serve_floor); may be given twice")
    parser.add_argument("--workers", type=int, help="pass --workers N to `hostfinder serve` (default: its own default)")
    parser.add_argument("--scaling", action="store_true", help="concurrent GETs by curl: --workers 1 and 2, the reference (and --peer)")
    parser.add_argument("--cpu", action="store_true", help="CPU per request of each process: Host Finder (and "
                        "its PostgreSQL) and the reference, creates, overwrites and GETs")
    sys.path.insert(0, str(REPO))
    from bench.harness import add_fsync_option, bench_database, say_durability
    add_fsync_option(parser)
    args = parser.parse_args()
    if "rclone" in args.peer and shutil.which("rclone") is None:
        raise SystemExit("--peer rclone: rclone is not installed")
    with bench_database("hf_bench_dav", durable=args.fsync) as url:
        say_durability(url)
        if args.cpu:
            cpu_per_request(url, args.runs, args.notes)
            return
        if args.scaling:
            scaling(url, args.runs, "rclone" if "rclone" in args.peer else None)
            return
        run(url, args.notes, args.creates, args.runs, args.peer, args.workers)


if __name__ == "__main__":
    main()
