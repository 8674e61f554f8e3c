"""The change feed for a long-lived follower outside the store (the FUSE mount): which tree paths
of which organisations changed, read from the ``guild.files.changed`` channel (store.events).

A follower needs no driver: losing the database is ``store.errors.Unavailable`` here, as it is
from every other store call, so a front end maps one error class and never imports psycopg."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import psycopg

from store.errors import Unavailable
from store.events import ChangeListener, Event, tree_paths


@dataclass(frozen=True)
class Change:
    """One change of a followed organisation: the tree paths it changed, its operation, and the
    event as the store sent it, for a follower that also keeps a store.filecache.FileCache (which
    applies the event itself: a deleted guild's event empties the whole folder)."""
    paths: list[str]
    operation: str
    event: Event


class ChangeFeed:
    """The changes of ``org_ids``, on a LISTEN connection of its own. ``wait`` blocks: run it in
    a thread. After Unavailable, ``connect`` again; events sent meanwhile are lost, so whatever a
    follower cached must then be dropped as a whole."""

    def __init__(self, conninfo: str, org_ids: Iterable[int]) -> None:
        self.org_ids = frozenset(org_ids)
        self._listener = ChangeListener(conninfo)

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
        return [Change(tree_paths(event), str(event.get("operation") or ""), event)
                for event in events if event.get("org_id") in self.org_ids]

    def close(self) -> None:
        self._listener.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
