"""Live changes: LISTEN for ``guild.files.changed`` and make the kernel forget what changed.

A note written over WebDAV, through the API or by an agent's tool commits with a NOTIFY
(store.provenance.record_change). The mount listens on a connection of its own (a pooled one
would be handed to other work between waits) and, for each event, invalidates the kernel's cached
name, attributes and pages for that path, so the next ``ls`` or ``cat`` asks the tree again.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable

import psycopg
import trio
from psycopg import sql

from store.paths import parse
from store.provenance import CHANNEL

log = logging.getLogger("hostfinder.fuse")

RETRY_SECONDS = 2.0


def tree_paths(event: dict) -> list[str]:
    """The tree paths an event touches. Display paths are tree paths, except that a record is
    ``<id>.json`` in its collection's folder and a collection is a folder holding
    ``collection.json``."""
    path = str(event.get("display_path") or "").strip("/")
    if not path:
        return []
    try:
        target = parse(path)
    except Exception:  # a path the tree does not show: nothing cached for it
        return [path]
    if target.family == "record":
        return [f"{path.rsplit('/', 1)[0]}/{target.record_id}.json"]
    if target.family == "collection":
        return [path, f"{path}/collection.json"]
    return [path]


class ChangeListener:
    """A dedicated LISTEN connection. ``wait`` blocks (run it in a worker thread)."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self.conn: psycopg.Connection | None = None

    def connect(self) -> None:
        self.close()
        self.conn = psycopg.connect(self.conninfo, autocommit=True)
        self.conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))

    def wait(self, timeout: float) -> list[dict]:
        """Events that arrive within ``timeout`` seconds (returns at the first one, plus any
        already queued)."""
        assert self.conn is not None
        events = []
        for note in self.conn.notifies(timeout=timeout, stop_after=1):
            events.append(_decode(note.payload))
        if events:  # drain what came in the same burst without waiting again
            for note in self.conn.notifies(timeout=0.01):
                events.append(_decode(note.payload))
        return [e for e in events if e]

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None


def _decode(payload: str) -> dict:
    try:
        value = json.loads(payload)
        return value if isinstance(value, dict) else {}
    except ValueError:
        return {}


async def follow_changes(conninfo: str, org_ids: Iterable[int],
                         invalidate: Callable[[str], Awaitable[None]],
                         invalidate_all: Callable[[], Awaitable[None]],
                         *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
    """Run until cancelled: invalidate each changed path of the mounted organisations. A lost
    connection is retried; events missed meanwhile are covered by dropping every cached entry."""
    orgs = set(org_ids)
    listener = ChangeListener(conninfo)
    started = False
    try:
        while True:
            try:
                await trio.to_thread.run_sync(listener.connect, abandon_on_cancel=True)
                if started:
                    log.info("change events: listening again; refreshing every cached entry")
                    await invalidate_all()
                else:
                    started = True
                    task_status.started()
                while True:
                    events = await trio.to_thread.run_sync(listener.wait, 1.0, abandon_on_cancel=True)
                    for event in events:
                        if event.get("org_id") not in orgs:
                            continue
                        for path in tree_paths(event):
                            log.debug("changed elsewhere: %s (%s)", path, event.get("operation"))
                            await invalidate(path)
            except psycopg.OperationalError as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                log.warning("change events: connection lost (%s); retrying in %.0f s", first, RETRY_SECONDS)
                if not started:
                    started = True
                    task_status.started()
                await trio.sleep(RETRY_SECONDS)
    finally:
        listener.close()
