"""Live changes: LISTEN for ``guild.files.changed`` and make the kernel forget what changed.

A note written over WebDAV, through the API or by an agent's tool commits with a NOTIFY
(store.provenance.record_change). The mount listens on a connection of its own (a pooled one
would be handed to other work between waits) and, for each event, invalidates the kernel's cached
name, attributes and pages for that path, so the next ``ls`` or ``cat`` asks the tree again.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

import psycopg
import trio

from store.events import ChangeListener, tree_paths

log = logging.getLogger("hostfinder.fuse")

RETRY_SECONDS = 2.0


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
