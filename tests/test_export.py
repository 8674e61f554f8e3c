"""GET /api/collections/<id>/export: the live records as JSONL, streamed from a server-side cursor."""
from __future__ import annotations

import json

from test_records_support import LEADS, bulk_records, make_collection, ok


def test_export_streams_ten_thousand_records_as_jsonl(server, db, boot, operator) -> None:
    leads = make_collection(db, boot["org_id"], "leads", LEADS)
    bulk_records(db, leads, 10_000)
    with db.transaction() as conn:  # a removed record is not exported
        conn.execute("UPDATE artifacts SET deleted_at = now() WHERE collection_id = %s AND key = '17'", (leads["id"],))
    r = operator.get(f"{server.url}/api/collections/{leads['id']}/export", stream=True)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/x-ndjson"
    assert r.headers["Content-Disposition"] == 'attachment; filename="leads.jsonl"'
    # streamed: no length known up front
    assert "Content-Length" not in r.headers and r.headers.get("Transfer-Encoding") == "chunked"
    lines = [json.loads(line) for line in r.iter_lines() if line]
    assert len(lines) == 9_999
    ids = [rec["id"] for rec in lines]
    assert ids == sorted(ids) and ids[:17] == list(range(1, 17)) + [18] and ids[-1] == 10_000
    first = lines[0]
    assert first["collection"] == "leads" and first["email"] == "user1@example.com" and first["score"] == 1
    assert first["display_path"] == f"org/{boot['org_id']}/collections/leads/1"
    assert set(first) == {"id", "collection", "email", "status", "score", "signed_up_at", "created_at",
                          "updated_at", "updated_by", "version", "display_path"}
    # the export reads the same records the listing does
    listed = ok(operator.get(f"{server.url}/api/collections/{leads['id']}/records", params={"limit": 1}))
    assert listed["total"] == 9_999 and listed["records"][0] == first


def test_an_abandoned_export_releases_its_connection(server, db, boot, operator) -> None:
    leads = make_collection(db, boot["org_id"], "leads", LEADS)
    bulk_records(db, leads, 3_000)
    for _ in range(12):  # more than the server's 8 threads: an export stuck on a gone client would starve it
        r = operator.get(f"{server.url}/api/collections/{leads['id']}/export", stream=True)
        assert json.loads(next(r.iter_lines()))["id"] == 1
        r.close()
    assert ok(operator.get(f"{server.url}/api/collections/{leads['id']}/records/3000"))["score"] == 3000


def test_export_of_an_empty_or_unknown_collection(server, db, boot, operator) -> None:
    empty = make_collection(db, boot["org_id"], "empty", LEADS)
    r = operator.get(f"{server.url}/api/collections/{empty['id']}/export")
    assert r.status_code == 200 and r.text == ""
    r = operator.get(f"{server.url}/api/collections/424242/export")
    assert r.status_code == 404 and r.json()["error"] == "unknown collection 424242"


def test_an_export_asked_for_another_format_is_refused_not_answered_with_jsonl(server, db, boot, operator) -> None:
    """?format=csv was ignored: the caller saved JSONL under the .csv name it chose."""
    leads = make_collection(db, boot["org_id"], "leads", LEADS)
    r = operator.get(f"{server.url}/api/collections/{leads['id']}/export", params={"format": "csv"})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == ("format: the API exports JSONL only, not 'csv'; leave format out, or take CSV from "
                                 f"the web app's table page (Export as CSV, /databases/{leads['id']}/export.csv)")
    for fmt in ("jsonl", "NDJSON"):
        r = operator.get(f"{server.url}/api/collections/{leads['id']}/export", params={"format": fmt})
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/x-ndjson")
