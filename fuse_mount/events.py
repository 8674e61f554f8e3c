"""Live changes: LISTEN for ``guild.files.changed`` and make the kernel forget what changed.

A note written over WebDAV, through the API or by an agent's tool commits with a NOTIFY
(store.provenance.record_change). The mount follows the store's change feed (store.changefeed, a
connection of its own) and, for each changed path, invalidates the kernel's cached name,
attributes and pages, so the next ``ls`` or ``cat`` asks the tree again.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

import trio

from store.changefeed import ChangeFeed
from store.errors import Unavailable

log = logging.getLogger("hostfinder.fuse")

RETRY_SECONDS = 2.0


async def follow_changes(conninfo: str, org_ids: Iterable[int],
                         invalidate: Callable[[str], Awaitable[None]],
                         invalidate_all: Callable[[], Awaitable[None]],
                         *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
    """Run until cancelled: invalidate each changed path of the mounted organisations. A lost
    connection is retried; events missed meanwhile are covered by dropping every cached entry."""
    feed = ChangeFeed(conninfo, org_ids)
    started = False
    try:
        while True:
            try:
                await trio.to_thread.run_sync(feed.connect, abandon_on_cancel=True)
                if started:
                    log.info("change events: listening again; refreshing every cached entry")
                    await invalidate_all()
                else:
                    started = True
                    task_status.started()
                while True:
                    changes = await trio.to_thread.run_sync(feed.wait, 1.0, abandon_on_cancel=True)
                    for path, operation in changes:
                        log.debug("changed elsewhere: %s (%s)", path, operation)
                        await invalidate(path)
            except Unavailable as exc:
                log.warning("change events: %s; retrying in %.0f s", exc, RETRY_SECONDS)
                if not started:
                    started = True
                    task_status.started()
                await trio.sleep(RETRY_SECONDS)
    finally:
        feed.close()
