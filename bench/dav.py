"""The Host Finder over WebDAV beside plain files through WsgiDAV's FilesystemProvider, as a ratio.

    .venv/bin/python -m bench.dav [--notes 10000]

Serves the same notes twice on the same cheroot settings: once through the Host Finder (the real
gateway over PostgreSQL: Basic login, Host tree, locks and properties in PostgreSQL), once as
plain files (FilesystemProvider with WsgiDAV's lock manager and property manager, the same Basic
login through a SimpleDomainController). Prints, for each figure, Host Finder, files and the ratio
Host Finder / files (lower is better for times): PROPFIND depth 1 of the folder, 1 000 sequential
GETs on one keep-alive connection, 1 000 PUTs, and GETs from 16 concurrent clients. The gateway is
measured twice: as `serve` runs by default (one query per GET) and with `serve --read-cache`.
Uses HOSTFINDER_BENCH_DATABASE_URL when set, else a private PostgreSQL.
"""
from __future__ import annotations

import argparse
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from wsgidav.fs_dav_provider import FilesystemProvider
from wsgidav.wsgidav_app import WsgiDAVApp

from gateway.server import Gateway, make_server
from bench.harness import bench_database
from store import admin
from store.db import Database

USER, PASSWORD = "bench@example.com", "bench password"
CLIENTS = 16


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(app: Any, threads: int) -> tuple[str, Any]:
    port = free_port()
    server = make_server(app, "127.0.0.1", port, threads=threads)
    server.prepare()
    threading.Thread(target=server.serve, daemon=True).start()
    return f"http://127.0.0.1:{port}", server


def _files_app(root: Path) -> WsgiDAVApp:
    return WsgiDAVApp({
        "provider_mapping": {"/": FilesystemProvider(str(root))},
        "http_authenticator": {"domain_controller": None, "accept_basic": True, "accept_digest": False,
                               "default_to_digest": False},
        "simple_dc": {"user_mapping": {"*": {USER: {"password": PASSWORD}}}},
        "verbose": 1, "logging": {"enable": False}, "dir_browser": {"enable": False},
        "lock_storage": True, "property_manager": True,
    })


def _session() -> requests.Session:
    s = requests.Session()
    s.auth = (USER, PASSWORD)
    return s


def _best(fn: Callable[[], Any], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def measure(base: str, folder: str, notes: int) -> dict[str, float]:
    s = _session()
    url = f"{base}/{folder}"
    assert s.get(f"{url}/n1.md").status_code == 200

    def propfind() -> None:
        r = s.request("PROPFIND", url + "/", headers={"Depth": "1"})
        assert r.status_code == 207

    def gets() -> None:
        for i in range(1, 1001):
            assert s.get(f"{url}/n{i}.md").status_code == 200

    def puts() -> None:
        for i in range(1, 1001):
            assert s.put(f"{url}/n{i}.md", data=f"# note {i}\n\nupdated\n".encode()).status_code in (201, 204)

    def concurrent() -> None:
        def client(k: int) -> None:
            c = _session()
            for i in range(k, 2000, CLIENTS):
                assert c.get(f"{url}/n{1 + i % notes}.md").status_code == 200
        threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    return {"PROPFIND depth 1 (s)": _best(propfind), "1 000 sequential GETs (s)": _best(gets, 1),
            "1 000 PUTs (s)": _best(puts, 1), f"2 000 GETs from {CLIENTS} clients (s)": _best(concurrent, 1)}


def run(conninfo: str, notes: int) -> None:
    db = Database(conninfo, max_size=20).open()
    boot = admin.bootstrap(db, email=USER, password=PASSWORD)
    org, guild = boot["org_id"], boot["guild_id"]
    folder = f"org/{org}/guilds/{guild}"
    with db.transaction() as conn:
        conn.execute("""INSERT INTO artifacts (org_id, kind, level, guild_id, key, display_path, content)
                        SELECT %s, 'note', 'guild', %s, 'n' || i || '.md', %s || 'n' || i || '.md',
                               '# note ' || i || chr(10) || chr(10) || 'body' FROM generate_series(1, %s) AS i""",
                     (org, guild, folder + "/", notes))
    root = Path(tempfile.mkdtemp(prefix="hostfinder-bench-files-"))
    (root / folder).mkdir(parents=True)
    for i in range(1, notes + 1):
        (root / folder / f"n{i}.md").write_text(f"# note {i}\n\nbody")
    files_url, files = _serve(_files_app(root), 16)
    results = {}
    try:
        results["files"] = measure(files_url, folder, notes)
        for label, read_cache in (("default", False), ("read-cache", True)):
            gateway = Gateway(db, read_cache=read_cache)
            if gateway.cache is not None:
                gateway.cache.wait_live()
            host_url, host = _serve(gateway, 16)
            try:
                results[label] = measure(host_url + "/dav", folder, notes)
            finally:
                host.stop()
                gateway.close()
    finally:
        files.stop()
        db.close()
        shutil.rmtree(root, ignore_errors=True)
    theirs = results["files"]
    print(f"{'figure':34} {'Host Finder':>11} {'--read-cache':>12} {'files':>8} {'ratio':>6} {'ratio':>6}")
    for name, value in results["default"].items():
        cached = results["read-cache"][name]
        print(f"{name:34} {value:11.3f} {cached:12.3f} {theirs[name]:8.3f} "
              f"{value / theirs[name]:6.2f} {cached / theirs[name]:6.2f}")
    print("(times in seconds; ratio = Host Finder / files, default then --read-cache; lower is better)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    args = parser.parse_args()
    with bench_database("hf_bench_dav") as url:
        run(url, args.notes)


if __name__ == "__main__":
    main()
