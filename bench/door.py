"""Health-check latency while the door is under attack, beside the same with no attack.

    .venv/bin/python -m bench.door [--idle 500] [--guessers 16] [--probes 200]

The gateway runs in this process as `hostfinder serve` runs it (16 worker threads) on a bench
database ($HOSTFINDER_BENCH_DATABASE_URL or a private PostgreSQL, see bench/harness.py). A probe is
one `GET /api/health` on a fresh connection, as a load balancer's health check makes it. The
attack runs in a separate process (so its Python does not share our interpreter lock): ``--idle``
TCP connections that send nothing (before the parking front, 16 of them stopped the gateway) and
``--guessers`` threads sending wrong passwords over Basic to /dav/ as fast as they are answered
(each costs an argon2 verification). The ratio is the latency under attack / without: 1.0 means
the attack costs a health check nothing.

    .venv/bin/python -m bench.door --hop [--requests 5000] [--runs 3]

What the front costs a keep-alive request: a trivial WSGI app (2 000 bytes) behind the door
and behind stock cheroot (same threads), ``--requests`` sequential requests on one connection
each, interleaved ``--runs`` times; printed as microseconds per request and the ratio door / cheroot.
"""
from __future__ import annotations

import argparse
import multiprocessing
import socket
import statistics
import threading
import time
from typing import Any

import requests

from bench.harness import bench_database
from gateway.server import Gateway, make_server
from store import admin
from store.db import Database

PROBE_WINDOW = 8.0   # seconds: under the door's 10 s header deadline, so the idle sockets stay open


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _attack(url: str, port: int, email: str, idle: int, guessers: int, ready: Any, stop: Any) -> None:
    """In a child process: hold ``idle`` silent connections and run ``guessers`` wrong-password loops."""
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(idle)]
    tries = [0]

    def guess() -> None:
        session = requests.Session()
        while not stop.is_set():
            try:
                session.request("PROPFIND", f"{url}/dav/", auth=(email, f"wrong-{tries[0]}"),
                                headers={"Depth": "0"}, timeout=10)
            except requests.RequestException:
                session = requests.Session()
            tries[0] += 1

    threads = [threading.Thread(target=guess, daemon=True) for _ in range(guessers)]
    for t in threads:
        t.start()
    time.sleep(1.0)          # let the guessers reach their pace
    ready.set()
    stop.wait()
    for s in held:
        s.close()
    print(f"   (attack: {idle} idle connections held, {tries[0]} wrong passwords sent)")


def _probe(url: str, count: int) -> list[float]:
    """Milliseconds per health check on a fresh connection; a failure or a 5 s wait counts as 5000."""
    latencies = []
    deadline = time.monotonic() + PROBE_WINDOW
    for _ in range(count):
        if time.monotonic() > deadline:
            break
        started = time.perf_counter()
        try:
            ok = requests.get(f"{url}/api/health", timeout=5, headers={"Connection": "close"}).status_code == 200
        except requests.RequestException:
            ok = False
        latencies.append((time.perf_counter() - started) * 1000 if ok else 5000.0)
    return latencies


def _p95(ms: list[float]) -> float:
    ordered = sorted(ms)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def _summary(ms: list[float]) -> str:
    return (f"median {statistics.median(ms):7.1f} ms   p95 {_p95(ms):7.1f} ms   max {max(ms):7.1f} ms   "
            f"({len(ms)} probes)")


def run(url_db: str, idle: int, guessers: int, probes: int) -> None:
    db = Database(url_db, max_size=20).open()
    boot = admin.bootstrap(db, email="bench@example.com", password="the right password")
    gateway = Gateway(db)
    port = _free_port()
    server = make_server(gateway, "127.0.0.1", port, threads=16)
    server.prepare()
    threading.Thread(target=server.serve, daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    try:
        _probe(url, 20)                                   # warm up
        quiet = _probe(url, probes)
        rows = []
        for label, n_idle, n_guessers in ((f"{idle} idle connections", idle, 0),
                                          (f"{guessers} password guessers", 0, guessers),
                                          (f"{idle} idle + {guessers} guessers", idle, guessers)):
            rows.append((label, _under_attack(url, port, boot["email"], n_idle, n_guessers, probes)))
    finally:
        server.stop()
        gateway.close()
        db.close()
    print(f"{'health check, no attack':36} {_summary(quiet)}")
    for label, loud in rows:
        print(f"{'health check, ' + label:36} {_summary(loud)}   ratio median "
              f"{statistics.median(loud) / statistics.median(quiet):.2f}x, p95 {_p95(loud) / _p95(quiet):.2f}x")


def _under_attack(url: str, port: int, email: str, idle: int, guessers: int, probes: int) -> list[float]:
    ctx = multiprocessing.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    attacker = ctx.Process(target=_attack, args=(url, port, email, idle, guessers, ready, stop))
    attacker.start()
    try:
        if not ready.wait(60):
            raise SystemExit("the attack did not start")
        return _probe(url, probes)
    finally:
        stop.set()
        attacker.join(30)


def _trivial(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    body = b"x" * 2000
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def _keep_alive_cost(server: Any, port: int, requests_: int) -> float:
    """Microseconds per request on one keep-alive connection (after a warm-up)."""
    import http.client
    server.prepare()
    threading.Thread(target=server.serve, daemon=True).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port)
        for _ in range(200):
            conn.request("GET", "/")
            conn.getresponse().read()
        started = time.perf_counter()
        for _ in range(requests_):
            conn.request("GET", "/")
            conn.getresponse().read()
        return (time.perf_counter() - started) / requests_ * 1e6
    finally:
        server.stop()


def hop(requests_: int, runs: int) -> None:
    from cheroot import wsgi
    for r in range(runs):
        port = _free_port()
        door = _keep_alive_cost(make_server(_trivial, "127.0.0.1", port, threads=16), port, requests_)
        port = _free_port()
        plain = _keep_alive_cost(wsgi.Server(("127.0.0.1", port), _trivial, numthreads=16), port, requests_)
        print(f"run {r + 1}: door {door:.0f} us/request, stock cheroot {plain:.0f} us/request, "
              f"ratio {door / plain:.2f}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--idle", type=int, default=500)
    ap.add_argument("--guessers", type=int, default=16)
    ap.add_argument("--probes", type=int, default=200)
    ap.add_argument("--hop", action="store_true", help="measure a keep-alive request's cost in the front")
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if args.hop:
        hop(args.requests, args.runs)
        return
    with bench_database("hf_bench_door") as url:
        run(url, args.idle, args.guessers, args.probes)


if __name__ == "__main__":
    main()
