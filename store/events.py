"""Change events: the ``guild.files.changed`` channel, in-process and across processes.

Every write's provenance row is published twice: with pg_notify inside the transaction (other
processes, delivered on commit) and to this process's subscribers right after its own commit
(``store.db.after_commit``), so a reader in the writing process never waits for the round trip.
The FUSE mount and the Host tree's content cache both follow these events."""
from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

import psycopg
from psycopg import sql

from store.db import liveness
from store.errors import StoreError
from store.paths import parse

log = logging.getLogger(__name__)

CHANNEL = "guild.files.changed"
Event = dict
_subscribers: list[Callable[[Event], None]] = []
_lock = threading.Lock()


def subscribe_local(fn: Callable[[Event], None]) -> Callable[[], None]:
    """Call ``fn(event)`` after each commit of a write in this process; returns an unsubscriber."""
    with _lock:
        _subscribers.append(fn)

    def unsubscribe() -> None:
        with _lock:
            if fn in _subscribers:
                _subscribers.remove(fn)
    return unsubscribe


def publish_local(event: Event) -> None:
    with _lock:
        subscribers = list(_subscribers)
    for fn in subscribers:
        try:
            fn(event)
        except Exception:  # a subscriber's failure must not fail the write that already committed
            log.exception("change event subscriber failed")


def tree_paths(event: Event) -> list[str]:
    """The tree paths an event touches. Display paths are tree paths, except that a record is
    ``<id>.json`` in its collection's folder and a collection is a folder holding
    ``collection.json``. A side file's event (store.scratch.channel) names its tree paths: the
    side file's and those whose hiding it changed."""
    if "user_id" in event:
        paths = event.get("paths")
        return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []
    path = str(event.get("display_path") or "").strip("/")
    if not path:
        return []
    try:
        target = parse(path)
    except StoreError:  # a path the tree does not show: nothing cached for it
        return [path]
    if target.family == "record":
        return [f"{path.rsplit('/', 1)[0]}/{target.record_id}.json"]
    if target.family == "collection":
        return [path, f"{path}/collection.json"]
    return [path]


class ChangeListener:
    """A dedicated LISTEN connection (a pooled one would be handed to other work between waits).
    ``wait`` blocks: run it in a thread of its own."""

    def __init__(self, conninfo: str, channels: tuple[str, ...] = (CHANNEL,)) -> None:
        self.conninfo = conninfo
        self.channels = channels
        self.conn: psycopg.Connection | None = None

    def connect(self) -> None:
        self.close()
        self.conn = psycopg.connect(self.conninfo, autocommit=True, **liveness(self.conninfo))
        for channel in self.channels:
            self.conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

    def wait(self, timeout: float) -> list[Event]:
        """Events that arrive within ``timeout`` seconds (returns at the first one, plus any
        already queued)."""
        assert self.conn is not None
        events = [_decode(n.payload) for n in self.conn.notifies(timeout=timeout, stop_after=1)]
        if events:  # drain what came in the same burst without waiting again
            events += [_decode(n.payload) for n in self.conn.notifies(timeout=0.01)]
        return [e for e in events if e]

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None


def _decode(payload: str) -> Event:
    try:
        value = json.loads(payload)
        return value if isinstance(value, dict) else {}
    except ValueError:
        return {}
