"""Live changes: LISTEN for ``guild.files.changed`` and make the kernel forget what changed.

A note written over WebDAV, through the API or by an agent's tool commits with a NOTIFY
(store.provenance.record_change), and so does a change of the user's side files from another of
their clients (store.scratch.channel). The mount follows the store's change feed (store.changefeed, a
connection of its own, the mount's only one: its content cache is fed from here too) and, for
each changed path, invalidates the kernel's cached name, attributes and pages, so the next ``ls``
or ``cat`` asks the tree again.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

import trio

from store.changefeed import Change, ChangeFeed
from store.errors import Unavailable

log = logging.getLogger("hostfinder.fuse")

RETRY_SECONDS = 2.0


async def follow_changes(conninfo: str, org_ids: Iterable[int], user_id: int,
                         changed: Callable[[Change], Awaitable[None]],
                         invalidate_all: Callable[[], Awaitable[None]],
                         following: Callable[[bool], None],
                         *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
    """Run until cancelled: hand each change of the mounted organisations, and of the mounting
    user's side files, to ``changed``. A lost connection is retried; ``following`` hears whether
    the feed is up (False while events may be missed), and events missed meanwhile are covered by
    ``invalidate_all`` once it is back."""
    feed = ChangeFeed(conninfo, org_ids, user_id)
    started = False
    try:
        while True:
            try:
                await trio.to_thread.run_sync(feed.connect, abandon_on_cancel=True)
                if started:
                    log.info("change events: listening again; refreshing every cached entry")
                    await invalidate_all()
                following(True)
                if not started:
                    started = True
                    task_status.started()
                while True:
                    changes = await trio.to_thread.run_sync(feed.wait, 1.0, abandon_on_cancel=True)
                    for change in changes:
                        # (this mount's own writes come back too: ``changed`` tells them apart)
                        log.debug("change event: %s (%s)", ", ".join(change.paths), change.operation)
                        await changed(change)
            except Unavailable as exc:
                following(False)
                log.warning("change events: %s; retrying in %.0f s", exc, RETRY_SECONDS)
                if not started:
                    started = True
                    task_status.started()
                await trio.sleep(RETRY_SECONDS)
    finally:
        following(False)
        feed.close()
