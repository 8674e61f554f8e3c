"""A table's records as a CSV download for spreadsheets (JSONL comes from
store.records.export_jsonl, exactly as the API sends it).

It streams from store.records.export_records (a server-side cursor), so memory stays flat however
many records the table holds."""
from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from store import records

CHUNK = 500
# A cell a spreadsheet would run as a formula (CSV injection): shown with a leading apostrophe.
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        value = "; ".join(str(v) for v in value)
    text = str(value)
    return "'" + text if isinstance(value, str) and text.startswith(_FORMULA) else text


def csv_lines(columns: Sequence[dict[str, Any]], rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """A header row (id, the columns, then the record's facts), one row per record; UTF-8 with a
    byte-order mark so that Excel reads accents right."""
    names = ["id", *(c["name"] for c in columns), *records.META]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(names)
    yield "\ufeff" + buf.getvalue()
    count = 0
    buf.seek(0)
    buf.truncate()
    for record in rows:
        writer.writerow([record.get("id") if n == "id" else _cell(record.get(n)) for n in names])
        count += 1
        if count % CHUNK == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    if buf.getvalue():
        yield buf.getvalue()
