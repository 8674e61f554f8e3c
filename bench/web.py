"""The web app's table page beside the records API answering the same query, on the same server.

    .venv/bin/python -m bench.web [--records 10000] [--runs 40]

Starts a private PostgreSQL (or uses HOSTFINDER_BENCH_DATABASE_URL), fills a 10 000-record table,
serves the real gateway on a free port and prints, as medians over keep-alive connections:
- the first page of the table (50 rows, HTML with the grid, filters and paging) against
  GET /api/collections/:id/records?limit=50 (JSON), and the same for a filtered, sorted page;
- a record's page (form and provenance strip) against GET .../records/:rid;
- the number of SQL statements each page runs, counted at psycopg's cursor, for a table of 10 000
  records and one of 1 record: equal counts mean the page runs a bounded number of queries, not
  one per row.
"""
from __future__ import annotations

import argparse
import re
import socket
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import requests

from bench.harness import bench_database
from bench.records import fill, make_collection
from gateway.server import Gateway, make_server
from store import admin
from store.db import Database

PAGE_ROWS = 50


class StatementCounter:
    """Counts the statements psycopg runs in this process while on (the server runs in-process)."""

    def __init__(self) -> None:
        self.count = 0
        self.on = False
        self._lock = threading.Lock()
        self._original = psycopg.Cursor.execute

    def install(self) -> None:
        counter, original = self, self._original

        def execute(cur: Any, *args: Any, **kwargs: Any) -> Any:
            if counter.on:
                with counter._lock:
                    counter.count += 1
            return original(cur, *args, **kwargs)
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]

    def uninstall(self) -> None:
        psycopg.Cursor.execute = self._original  # type: ignore[method-assign]

    def measure(self, fn: Callable[[], object]) -> int:
        self.count, self.on = 0, True
        try:
            fn()
        finally:
            self.on = False
        return self.count


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def get(session: requests.Session, url: str, expect: str | None = None) -> Callable[[], None]:
    def run() -> None:
        r = session.get(url)
        assert r.status_code == 200, (url, r.status_code, r.text[:300])
        if expect is not None:
            assert expect in r.text, (url, expect)
    return run


def report(what: str, page: float, api: float) -> None:
    print(f"{what:<52} web {page:8.2f} ms   API {api:8.2f} ms   ratio {page / api:5.2f}x")


def run(url: str, n: int, runs: int) -> None:
    db = Database(url, min_size=2, max_size=8).open()
    boot = admin.bootstrap(db, email="bench@example.com", password="bench password 1")
    big = make_collection(db, boot["org_id"], None, "leads")
    fill(db, big, n)
    small = make_collection(db, boot["org_id"], None, "tiny")
    fill(db, small, 1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = make_server(Gateway(db), "127.0.0.1", port, threads=4)
    server.prepare()
    threading.Thread(target=server.serve, daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    try:
        web = requests.Session()
        r = web.post(base + "/login", data={"email": boot["email"], "password": "bench password 1"},
                     allow_redirects=False)
        assert r.status_code == 302, r.text
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {boot['member_token']}"
        cid = big["id"]
        # The record measured has a recorded change, as a record an agent or a person touched does.
        r = api.patch(f"{base}/api/collections/{cid}/records/5000", json={"body": {"city": "Paris"}})
        assert r.status_code == 200, r.text
        print(f"table of {n} records, first page of {PAGE_ROWS} rows; medians of {runs} requests over keep-alive\n")
        page = get(web, f"{base}/databases/{cid}", expect="user1@example.com")
        route = get(api, f"{base}/api/collections/{cid}/records?limit={PAGE_ROWS}")
        report("first page", median_ms(page, runs), median_ms(route, runs))
        filtered = get(web, f"{base}/databases/{cid}?f.status=won&f.score.gte=100&sort=score&dir=desc")
        filtered_api = get(api, f'{base}/api/collections/{cid}/records?limit={PAGE_ROWS}'
                                f'&where={{"status":"won","score":{{"gte":100}}}}&order=score%20desc')
        report("filtered (status, score range), sorted by score", median_ms(filtered, runs),
               median_ms(filtered_api, runs))
        searched = get(web, f"{base}/databases/{cid}?q=user42")
        searched_api = get(api, f"{base}/api/collections/{cid}/records?query=user42&limit=100")
        report("search (one token)", median_ms(searched, runs), median_ms(searched_api, runs))
        record = get(web, f"{base}/databases/{cid}/records/5000", expect="user5000@example.com")
        record_api = get(api, f"{base}/api/collections/{cid}/records/5000")
        report("a record (form and provenance strip)", median_ms(record, runs), median_ms(record_api, runs))
        size = len(web.get(f"{base}/databases/{cid}").content)
        print(f"\nfirst page HTML: {size / 1024:.1f} KiB, "
              f"{len(re.findall('<tr data-href', web.get(f'{base}/databases/{cid}').text))} rows")

        counter = StatementCounter()
        counter.install()
        try:
            print("\nSQL statements per request (the session lookup included):")
            for label, big_url, small_url in (
                    ("table page", f"/databases/{cid}", f"/databases/{small['id']}"),
                    ("filtered, sorted page", f"/databases/{cid}?f.status=won&sort=score&dir=desc",
                     f"/databases/{small['id']}?f.status=won&sort=score&dir=desc"),
                    ("record page", f"/databases/{cid}/records/5000", f"/databases/{small['id']}/records/1"),
                    ("databases list", "/databases", "/databases")):
                q_big = counter.measure(get(web, base + big_url))
                q_small = counter.measure(get(web, base + small_url))
                print(f"  {label:<24} {q_big:3d} with {n} records, {q_small:3d} with 1 record")
            q_api = counter.measure(get(api, f"{base}/api/collections/{cid}/records?limit={PAGE_ROWS}"))
            print(f"  {'records API route':<24} {q_api:3d}")
        finally:
            counter.uninstall()
    finally:
        server.stop()
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    with bench_database("hf_bench_web") as url:
        run(url, args.records, args.runs)


if __name__ == "__main__":
    main()
