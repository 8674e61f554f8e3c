"""What live locks cost every other request: the same WebDAV requests with no lock anywhere, then
with one login's worth of locks (store.locks.MAX_LIVE_PER_HOLDER, each owner at its cap) in
another organisation, then in the requests' own organisation (on other files of the same folder).

    .venv/bin/python -m bench.locks [--locks 1000] [--requests 300] [--runs 3]

A request reads only the live leases that can matter to it (dav_provider/locks.py,
request_focus): this shows what one member at the lock limit adds to everyone else's requests.
The application is called in this process with a ready environ, as bench/dav_app.py does (the
same Basic login, the same gateway as `hostfinder serve` builds); the reference is the same
request with no lease in the store, in the same run. Each run goes through every phase in turn
(the leases are put back for each), so a machine busy for a while weighs on all phases alike.
"watched": as served, the lock watch lets a process skip a read that found nothing near the same
request until a lock changes; "every request reads": the same without the watch (as while locks
change all the time), so each request runs its lease query. Prints µs per request (best of runs)
and the ratio to no locks: about 1.0 means the locks cost nothing.
"""
from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from psycopg.types.json import Jsonb

from bench.dav import seed
from bench.dav_app import call, environ
from bench.harness import bench_database
from gateway.server import Gateway
from store import admin
from store import locks as leases
from store.db import Database

NOTES = 200


def timed(gateway: Gateway, make: Callable[[int], dict[str, Any]], n: int) -> float:
    """µs per request of ``n`` requests made by ``make``."""
    envs = [make(i) for i in range(n)]
    started = time.perf_counter()
    for env in envs:
        status = call(gateway, env)
        assert status[0] == "2", (env["REQUEST_METHOD"], env["PATH_INFO"], status)
    return (time.perf_counter() - started) / n * 1e6


def add_leases(db: Database, folder: str, count: int, holder: str) -> None:
    """``count`` live leases in ``folder`` held by ``holder``, each owner at the cap."""
    owner = '<D:owner xmlns:D="DAV:">' + "O" * (leases.MAX_OWNER_BYTES - 40) + "</D:owner>"
    until = datetime.now(timezone.utc) + timedelta(hours=1)
    with db.transaction() as conn:
        for i in range(count):
            conn.execute("INSERT INTO path_leases (token, path, data, expires_at) VALUES (%s, %s, %s, %s)",
                         (f"opaquelocktoken:{uuid.uuid4()}", f"{folder}/locked-{uuid.uuid4().hex[:8]}-{i}.md",
                          Jsonb({"type": "write", "scope": "shared", "depth": "0", "owner": owner,
                                 "timeout": 3600, "principal": holder}), until))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locks", type=int, default=leases.MAX_LIVE_PER_HOLDER)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with bench_database("hf_bench_locks") as url:
        db = Database(url, max_size=4).open()
        boot, folder = seed(db, NOTES)
        other = admin.bootstrap(db, org_name="Elsewhere", email="other@example.com", password="another horse battery")
        gateway = Gateway(db)
        gateway.login_watch.wait_live()
        figures = {
            "PROPFIND depth 0 of a note": lambda i: dict(environ("PROPFIND", f"/dav/{folder}/n{1 + i % 100}.md"),
                                                         HTTP_DEPTH="0"),
            "PUT overwrite of a note": lambda i: environ("PUT", f"/dav/{folder}/n{101 + i % 100}.md", b"x" * 1000),
            "GET of a note": lambda i: environ("GET", f"/dav/{folder}/n{1 + i % 100}.md"),
        }
        elsewhere = f"org/{other['org_id']}/guilds/{other['guild_id']}"
        # (phase, where the locks are, watched)
        phases = [("none", None, True), ("other", elsewhere, True), ("this", folder, True),
                  ("none, reads", None, False), ("this, reads", folder, False)]
        storage = gateway.dav.provider.lock_manager.storage
        watch = storage.watch
        results: dict[str, dict[str, list[float]]] = {}
        try:
            for _ in range(args.runs):
                for phase, where, watched in phases:
                    with db.transaction() as conn:
                        conn.execute("DELETE FROM path_leases")
                    if where is not None:
                        add_leases(db, where, args.locks, "someone@example.com")
                    time.sleep(0.5)   # the lease watch hears of them
                    storage.watch = watch if watched else None
                    for make in figures.values():
                        timed(gateway, make, 30)   # warm: statements prepared, caches filled
                    for figure, make in figures.items():
                        results.setdefault(figure, {}).setdefault(phase, []).append(
                            timed(gateway, make, args.requests))
        finally:
            storage.watch = watch
            gateway.close()
            db.close()
    print(f"{args.locks} live locks of one login, owners of {leases.MAX_OWNER_BYTES} bytes; µs per request "
          "(best of runs) and ratio to no locks")
    print(f"{'':30} {'watched':^50} {'every request reads':^30}")
    print(f"{'figure':30} {'no locks':>9} {'in another org':>15} {'ratio':>6} {'in this org':>12} {'ratio':>6} "
          f"{'no locks':>9} {'in this org':>12} {'ratio':>6}")
    for figure, by in results.items():
        best = {phase: min(times) for phase, times in by.items()}
        base, reads = best["none"], best["none, reads"]
        print(f"{figure:30} {base:9.0f} {best['other']:15.0f} {best['other'] / base:6.2f} {best['this']:12.0f} "
              f"{best['this'] / base:6.2f} {reads:9.0f} {best['this, reads']:12.0f} {best['this, reads'] / reads:6.2f}")


if __name__ == "__main__":
    main()
