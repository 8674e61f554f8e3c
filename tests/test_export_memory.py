"""Exports are bounded by bytes, not by records: whatever the records hold, an export is sent in
pieces of at most 256 KB (each one chunk on the wire) and read from its cursor in fetches of about
1 MB, with exactly the bytes it always had.

A record of 32 000 control characters (U+0001, which the store accepts) is 192 KB of JSON ("\\u0001"
is six bytes): when a piece was 500 lines, eight such exports took a gateway from 58 MB to 3.6 GB."""
from __future__ import annotations

import csv
import io
import json
from typing import Any

import psycopg
import pytest
import requests

from store import records
from store.access import Principal
from store.collections import collection_for_member
from test_records_support import LEADS, bulk_records, make_collection
from tests.web_browser import web_login
from web import export

LIMIT = 256 * 1024                           # store.records.EXPORT_PIECE_BYTES
CONTROL = "\x01" * 32_000                    # 192 KB a line in JSON
VALUES = [CONTROL, "é" * 16_000, "plain", "🙂" * 8_000, "=1+2", CONTROL, "tab\there, \"quoted\"\r\nline"]
COLUMNS = [{"name": "t", "type": "text", "description": "text", "required": False, "unique": False}]


def seed(db: Any, coll: dict[str, Any], values: list[str]) -> None:
    """One record per value (column t), ids 1.., in one statement."""
    with db.transaction() as conn:
        conn.execute(
            """INSERT INTO artifacts (org_id, kind, level, collection_id, key, display_path, content_json,
                                      search_blob, created_by, updated_by)
               SELECT %(org)s, 'object', 'org', %(cid)s, g::text, %(prefix)s || g, jsonb_build_object('t', v), v,
                      'seed', 'seed'
                 FROM unnest(%(values)s::text[]) WITH ORDINALITY AS u(v, g)""",
            {"org": coll["org_id"], "cid": coll["id"], "values": values,
             "prefix": f"org/{coll['org_id']}/collections/{coll['name']}/"})
        conn.execute("UPDATE artifact_collections SET next_id = %s WHERE id = %s", (len(values) + 1, coll["id"]))


@pytest.fixture
def big(db, boot) -> dict[str, Any]:
    """A table of 70 records, 20 of them 192 KB lines: 5 MB of JSONL, 1.3 MB of CSV."""
    coll = make_collection(db, boot["org_id"], "big", COLUMNS)
    seed(db, coll, VALUES * 10)
    return coll


def collection(db, boot, coll: dict[str, Any]) -> Any:
    member = Principal("user", boot["user_id"], boot["email"], frozenset({boot["org_id"]}))
    with db.connection() as conn:
        return collection_for_member(conn, member, coll["id"])


def jsonl_as_it_was(db, c) -> bytes:
    """The export's bytes as they always were: each record's JSON line, UTF-8."""
    return b"".join((json.dumps(r, ensure_ascii=False) + "\n").encode() for r in records.export_records(db, c))


def csv_as_it_was(c, rows) -> bytes:
    names = ["id", *(col["name"] for col in c.columns), *records.META]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(names)
    for r in rows:
        writer.writerow([r.get("id") if n == "id" else export._cell(r.get(n)) for n in names])
    return ("\ufeff" + buf.getvalue()).encode()


def chunks(session: requests.Session, url: str) -> list[bytes]:
    """The body's chunks exactly as the server framed them (urllib3 reads one whole chunk at a time)."""
    r = session.get(url, stream=True, timeout=60)
    assert r.status_code == 200, r.text[:300]
    assert r.headers.get("Transfer-Encoding") == "chunked" and r.raw.chunked
    return list(r.raw.read_chunked())


def assert_bounded(pieces: list[bytes], whole: bytes) -> None:
    pieces = [p.encode() if isinstance(p, str) else p for p in pieces]  # (as a WSGI server encodes text)
    assert b"".join(pieces) == whole
    assert len(whole) > 4 * LIMIT
    assert max(len(p) for p in pieces) <= LIMIT, sorted(len(p) for p in pieces)[-3:]


def test_the_api_export_sends_large_records_in_chunks_of_at_most_256_kb(server, db, boot, operator, big) -> None:
    pieces = chunks(operator, f"{server.url}/api/collections/{big['id']}/export")
    whole = jsonl_as_it_was(db, collection(db, boot, big))
    assert_bounded(pieces, whole)
    lines = [json.loads(line) for line in whole.decode().splitlines()]
    assert [r["id"] for r in lines] == list(range(1, 71))
    assert [r["t"] for r in lines] == VALUES * 10
    assert whole.count(b"\\u0001") == 20 * 32_000


def test_the_web_exports_send_large_records_in_chunks_of_at_most_256_kb(server, db, boot, big) -> None:
    c = collection(db, boot, big)
    s = web_login(server, boot["email"], boot["password"])
    assert_bounded(chunks(s, f"{server.url}/databases/{big['id']}/export.jsonl"), jsonl_as_it_was(db, c))
    whole = csv_as_it_was(c, records.export_records(db, c))
    assert_bounded(chunks(s, f"{server.url}/databases/{big['id']}/export.csv"), whole)
    rows = list(csv.DictReader(io.StringIO(whole.decode("utf-8-sig"))))
    assert [r["t"] for r in rows] == [("'" + v if v.startswith("=") else v) for v in VALUES * 10]


def test_the_store_yields_pieces_of_at_most_256_kb_with_unchanged_bytes(db, boot, big) -> None:
    c = collection(db, boot, big)
    assert_bounded(list(records.export_jsonl(db, c)), jsonl_as_it_was(db, c))
    assert_bounded(list(export.csv_lines(c.columns, records.export_records(db, c))),
                   csv_as_it_was(c, records.export_records(db, c)))


def test_a_text_longer_than_a_piece_is_cut_anywhere_and_keeps_its_bytes() -> None:
    texts = ["a" * 10, "é🙂" * 40, "b", "ü" * 7, "", "c" * 25]
    whole = "".join(texts).encode()
    pieces = list(records.in_pieces(texts, limit=16))
    assert b"".join(pieces) == whole
    assert all(0 < len(p) <= 16 for p in pieces)
    assert len(pieces) <= len(whole) // 16 + len(texts)  # small texts are joined, not sent one by one


def test_fetches_are_fitted_to_the_bytes_of_the_rows(db, boot, monkeypatch) -> None:
    """Large rows are read a few at a time (a fetch is about 1 MB as PostgreSQL sends it); small
    ones still 500 a fetch."""
    asked: list[int] = []
    real = psycopg.ServerCursor.fetchmany

    def fetchmany(self: Any, size: int = 0) -> Any:
        asked.append(size)
        return real(self, size)
    monkeypatch.setattr(psycopg.ServerCursor, "fetchmany", fetchmany)
    control = make_collection(db, boot["org_id"], "control", COLUMNS)
    seed(db, control, [CONTROL] * 40)
    assert [r["t"] for r in records.export_records(db, collection(db, boot, control))] == [CONTROL] * 40
    # A first fetch of 20 rows before their size is known, then 5 at a time: each row is 192 KB
    # from PostgreSQL too (jsonb's text escapes the control characters as JSON does).
    assert asked[0] == 20 and set(asked[1:-1]) == {5}, asked

    leads = make_collection(db, boot["org_id"], "leads", LEADS)
    bulk_records(db, leads, 1_500)
    asked.clear()
    assert sum(1 for _ in records.export_records(db, collection(db, boot, leads))) == 1_500
    assert asked[1:] == [500, 500, 500, 500], asked
