"""A table's records as a CSV download for spreadsheets (JSONL comes from
store.records.export_jsonl, exactly as the API sends it).

It streams from store.records.export_records (a server-side cursor) in pieces of at most
store.records.EXPORT_PIECE_BYTES, so memory stays flat however many records the table holds, and
however large they are."""
from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from store import records

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


def csv_lines(columns: Sequence[dict[str, Any]], rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """A header row (id, the columns, then the record's facts), one row per record; UTF-8 with a
    byte-order mark so that Excel reads accents right. Sent in pieces of at most
    EXPORT_PIECE_BYTES bytes, never a string of many rows' worth."""
    try:
        yield from records.in_pieces(_csv_rows(columns, rows))
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()  # an export abandoned by its client releases its connection now


def _csv_rows(columns: Sequence[dict[str, Any]], rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """Each row's CSV text, the header's with the byte-order mark."""
    names = ["id", *(c["name"] for c in columns), *records.META]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")

    def taken() -> str:
        text = buf.getvalue()
        buf.seek(0)
        buf.truncate()
        return text
    writer.writerow(names)
    yield "\ufeff" + taken()
    for record in rows:
        writer.writerow([record.get("id") if n == "id" else _cell(record.get(n)) for n in names])
        yield taken()
