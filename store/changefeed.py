"""The change feed for a long-lived follower outside the store (the FUSE mount): which tree paths
of which organisations changed, read from the ``guild.files.changed`` channel (store.events).

A follower needs no driver: losing the database is ``store.errors.Unavailable`` here, as it is
from every other store call, so a front end maps one error class and never imports psycopg."""
from __future__ import annotations

from collections.abc import Iterable

import psycopg

from store.errors import Unavailable
from store.events import ChangeListener, tree_paths


class ChangeFeed:
    """The changed tree paths of ``org_ids``, on a LISTEN connection of its own. ``wait`` blocks:
    run it in a thread. After Unavailable, ``connect`` again; events sent meanwhile are lost, so
    whatever a follower cached must then be dropped as a whole."""

    def __init__(self, conninfo: str, org_ids: Iterable[int]) -> None:
        self.org_ids = frozenset(org_ids)
        self._listener = ChangeListener(conninfo)

    def connect(self) -> None:
        try:
            self._listener.connect()
        except psycopg.Error as exc:
            raise Unavailable(f"cannot listen for changes: {_first_line(exc)}") from exc

    def wait(self, timeout: float) -> list[tuple[str, str]]:
        """(tree path, operation) for each change within ``timeout`` seconds (returns at the first
        burst), only for the organisations followed."""
        try:
            events = self._listener.wait(timeout)
        except psycopg.Error as exc:
            raise Unavailable(f"the change feed's connection was lost: {_first_line(exc)}") from exc
        return [(path, str(event.get("operation") or ""))
                for event in events if event.get("org_id") in self.org_ids
                for path in tree_paths(event)]

    def close(self) -> None:
        self._listener.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
