"""The WebDAV application's own cost, without HTTP: Host Finder's WSGI app beside WsgiDAV's
FilesystemProvider app, each called directly in this process.

    .venv/bin/python -m bench.dav_app [--requests 2000] [--runs 3] [--no-fsync]

bench/dav.py measures what a client sees: the HTTP server (cheroot with the parking front, the
same for both sides), the client and the application. This one calls each WSGI application with a
ready environ instead (the same Basic login; a guild of 10 000 notes of 1-4 KB in the database and
the same notes on disk), so it shows where a request's time goes: µs per request on each side and
their ratio, per run. Beside bench/dav.py's times over HTTP (µs per request = the reference's time
/ 1 000 or / 10 000), the difference is the HTTP layer and the client, the same for both sides: a
Host Finder application that cost nothing would score (HTTP time - files' application time) /
HTTP time there. (Serving both apps over HTTP from this process would measure the GIL shared
with the client more than the servers, so that stays bench/dav.py's job.) As there, PostgreSQL
flushes every commit unless ``--no-fsync``; the files' side writes without flushing, as WsgiDAV does.
"""
from __future__ import annotations

import argparse
import base64
import io
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.dav import PASSWORD, USER, _files_app, note, seed, seed_files

AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
NOTES = 10_000


def environ(method: str, path: str, body: bytes = b"") -> dict[str, Any]:
    return {"REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1", "HTTP_AUTHORIZATION": AUTH, "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False,
            "wsgi.run_once": False, "wsgi.version": (1, 0)}


def call(app: Any, env: dict[str, Any]) -> str:
    status: list[str] = []
    b"".join(app(env, lambda s, h, exc_info=None: status.append(s)))
    return status[0]


class Side:
    """One application and where its notes are: ``folder`` holds n1.md..n10000.md, ``new`` is an
    empty folder for creates (a new one per run)."""

    def __init__(self, name: str, app: Any, prefix: str, folder: str, new: Callable[[int], str]) -> None:
        self.name, self.app, self.prefix, self.folder, self.new = name, app, prefix, folder, new

    def requests(self, run: int, n: int) -> dict[str, list[tuple[str, str, bytes]]]:
        f, new = f"{self.prefix}/{self.folder}", f"{self.prefix}/{self.new(run)}"
        return {"GET": [("GET", f"{f}/n{1 + (i * 7) % NOTES}.md", b"") for i in range(n)],
                "PUT overwrite": [("PUT", f"{f}/n{1 + i % NOTES}.md", note(i + run).encode()) for i in range(n)],
                "PUT create": [("PUT", f"{new}/c{i}.md", note(i).encode()) for i in range(n)]}


def in_process(side: Side, reqs: list[tuple[str, str, bytes]]) -> float:
    envs = [environ(m, p, b) for m, p, b in reqs]
    started = time.perf_counter()
    for env in envs:
        status = call(side.app, env)
        assert status[0] == "2", (side.name, env["PATH_INFO"], status)
    return (time.perf_counter() - started) / len(envs) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    from bench.harness import add_fsync_option, bench_database, say_durability
    add_fsync_option(parser)
    args = parser.parse_args()
    from gateway.server import Gateway
    from store import admin
    from store.db import Database

    with bench_database("hf_bench_dav_app", durable=args.fsync) as url:
        say_durability(url)
        db = Database(url, max_size=4).open()
        boot, folder = seed(db, NOTES)
        org = boot["org_id"]
        guilds = [admin.create_guild(db, org_id=org, name=f"creates {r}")["id"] for r in range(args.runs + 1)]
        root = seed_files(folder, NOTES)
        for r in range(args.runs + 1):
            (root / f"creates-{r}").mkdir()
        gateway = Gateway(db)
        gateway.login_watch.wait_live()
        sides = [Side("Host Finder", gateway, "/dav", folder, lambda r: f"org/{org}/guilds/{guilds[r]}"),
                 Side("files", _files_app(root), "", folder, lambda r: f"creates-{r}")]
        for side in sides:  # the login is remembered, statements are prepared
            for method, path, body in side.requests(args.runs, 20)["GET"]:
                call(side.app, environ(method, path, body))
        try:
            results: dict[str, dict[str, list[float]]] = {}
            for run in range(args.runs):
                for side in sides:
                    for figure, reqs in side.requests(run, args.requests).items():
                        results.setdefault(figure, {}).setdefault(side.name, []).append(in_process(side, reqs))
        finally:
            gateway.close()
            db.close()
            shutil.rmtree(root, ignore_errors=True)
    print(f"{'figure (µs per request, best run)':36} {'Host Finder':>12} {'files':>8} {'ratios per run':>20}")
    for figure, by in results.items():
        ratios = [h / f for h, f in zip(by["Host Finder"], by["files"])]
        print(f"{figure:36} {min(by['Host Finder']):12.0f} {min(by['files']):8.0f} "
              f"{' '.join(f'{x:.2f}' for x in ratios):>20}")
    print("(each WSGI application called in this process, one thread, no HTTP; ratio = Host Finder / files)")


if __name__ == "__main__":
    main()
