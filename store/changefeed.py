"""The change feed for a long-lived follower outside the store (the FUSE mount): which tree paths
of which organisations changed, read from the ``guild.files.changed`` channel (store.events), and
which of one user's side files (store.scratch.channel), both in commit order on one connection.

A follower needs no driver: losing the database is ``store.errors.Unavailable`` here, as it is
from every other store call, so a front end maps one error class and never imports psycopg."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import psycopg

from store import scratch
from store.errors import Unavailable
from store.events import CHANNEL, ChangeListener, Event, tree_paths


# The operation of a Change from a side file's event (a content cache that applies it forgets
# what it kept of the paths it names: a note it now hides from this user).
SIDE_FILE = "side file"


@dataclass(frozen=True)
class Change:
    """One change of a followed organisation: the tree paths it changed, its operation, and the
    event as the store sent it, for a follower that also keeps a store.filecache.FileCache (which
    applies the event itself: a deleted guild's event empties the whole folder)."""
    paths: list[str]
    operation: str
    event: Event


class ChangeFeed:
    """The changes of ``org_ids`` (and of ``user_id``'s side files, when given), on a LISTEN
    connection of its own. ``wait`` blocks: run it in a thread. After Unavailable, ``connect``
    again; events sent meanwhile are lost, so whatever a follower cached must then be dropped as a
    whole."""

    def __init__(self, conninfo: str, org_ids: Iterable[int], user_id: int | None = None) -> None:
        self.org_ids = frozenset(org_ids)
        self.user_id = user_id
        self._listener = ChangeListener(conninfo, (CHANNEL,) if user_id is None else (CHANNEL, scratch.channel(user_id)))

    def connect(self) -> None:
        try:
            self._listener.connect()
        except psycopg.Error as exc:
            raise Unavailable(f"cannot listen for changes: {_first_line(exc)}") from exc

    def wait(self, timeout: float) -> list[Change]:
        """The changes within ``timeout`` seconds (returns at the first burst), only for the
        organisations followed."""
        try:
            events = self._listener.wait(timeout)
        except psycopg.Error as exc:
            raise Unavailable(f"the change feed's connection was lost: {_first_line(exc)}") from exc
        changes = []
        for event in events:
            if "user_id" in event:  # a side file's (scratch.channel): for its user only
                if event["user_id"] == self.user_id:
                    changes.append(Change(tree_paths(event), SIDE_FILE, event))
            elif event.get("org_id") in self.org_ids:
                changes.append(Change(tree_paths(event), str(event.get("operation") or ""), event))
        return changes

    def close(self) -> None:
        self._listener.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
