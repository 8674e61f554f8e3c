"""Folder listings kept between passes: what the last listing of a folder said, until it expires
or something in it changes.

`ls -l`, `grep -r` and a file manager list a folder again and again, and every editor save first
asks whether a temp name is free. A listing answers both without a query while it is fresh. A
change (an event from elsewhere, or a write, move or delete through this mount) marks only the
changed name as unsure: that name's lookup asks the store again, and the next pass over the
folder lists it afresh, while other names are still answered, so a run of saves in a big folder
keeps its listing."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fuse_mount.inodes import parent_of
from store.errors import StoreError
from store.layout import folder_of, split
from store.paths import nfc

MISSING = object()


@dataclass
class _Listing:
    expires: float
    entries: Any                      # DirectoryListing.shared(): handed to the next pass
    names: dict[str, Any]             # name -> node
    unsure: set[str] = field(default_factory=set)
    # A name was written here since: ``names`` knows its new node, the kept entries do not.
    relist: bool = False


def keeps(folder: str) -> bool:
    """Whether a listing of ``folder`` may be kept at all: only where every change to its entries
    comes with an event or through this mount (notes, task and memory, scripts, collections and
    records, the user's side files), or ends by the clock at a time the listing states (a side
    file's expiry, a rename-away's hiding: HostTree.listing). The root and org/ (memberships),
    guilds/ and agents/ (a guild or agent is created with no file event) and history-archive/ (a
    memory save's event names memory.md, not the archived version) are listed afresh at each
    pass; a kept listing would answer a new agent's folder "no such file" until it expired. They
    are small, so this costs a few short queries."""
    parts = folder.split("/") if folder else []
    if len(parts) < 2:
        return False
    if len(parts) == 3 and parts[2] in ("guilds", "agents"):
        return False
    return not (len(parts) == 5 and parts[2] == "agents" and parts[4] == "history-archive")


def is_folder(path: str) -> bool:
    """Whether ``path`` names a folder of the layout (by its shape alone; a path that names
    nothing is no folder)."""
    try:
        return folder_of(split(path)) is not None
    except StoreError:
        return False


def drop_folder(kept: dict[str, Any], path: str) -> None:
    """``path`` changed: what ``kept`` (keyed by folder path) holds for it goes, and, when it is
    a folder, what it holds below it too (a guild or agent deleted with its folders)."""
    if kept.pop(path, None) is not None or is_folder(path):
        below = path + "/"
        for folder in [f for f in kept if f.startswith(below)]:
            del kept[folder]


class ListingCache:
    """folder path -> its last listing. Used from the event loop only, so it takes no lock.

    A listing is kept for as long as the caller says (until an event says otherwise) only while
    the change feed is up: while it is down (or not up yet) events may be missed, so listings are
    kept for ``unfollowed_seconds`` at most, and those kept before it went down are dropped."""

    def __init__(self, unfollowed_seconds: float) -> None:
        self._folders: dict[str, _Listing] = {}
        # Counts changes, so that a listing queried while something changed is not kept.
        self.serial = 0
        self.unfollowed_seconds = unfollowed_seconds
        self.up = False

    def following(self, up: bool) -> None:
        """The change feed is up (every change of a kept folder will be heard) or down."""
        if not up:
            self.clear()
        self.up = up

    def put(self, folder: str, serial: int, entries: Any, nodes: list[Any], seconds: float) -> None:
        """Keep a listing taken when ``serial`` was current (nothing is kept if it moved on)."""
        if serial == self.serial and keeps(folder):
            if not self.up:
                seconds = min(seconds, self.unfollowed_seconds)
            self._folders[folder] = _Listing(time.monotonic() + seconds, entries, {n.name: n for n in nodes})

    def _fresh(self, folder: str) -> _Listing | None:
        listing = self._folders.get(folder)
        if listing is None:
            return None
        if listing.expires <= time.monotonic():
            del self._folders[folder]
            return None
        return listing

    def entries(self, folder: str) -> Any:
        """The entries for a new pass over ``folder``, or None when it must be listed again."""
        listing = self._fresh(folder)
        return listing.entries if listing is not None and not listing.unsure and not listing.relist else None

    def lookup(self, folder: str, name: str) -> Any:
        """The node the listing has for ``name``, None if the listing says there is none, or
        MISSING when the listing cannot say (none kept, expired, or the name changed since)."""
        listing = self._fresh(folder)
        name = nfc(name)
        if listing is None or name in listing.unsure:
            return MISSING
        return listing.names.get(name)

    def changed(self, path: str) -> None:
        """``path`` changed (written, moved, deleted, here or elsewhere): its name in its folder
        is unsure, and listings of ``path`` itself and below it (a folder that went with its
        guild or agent) are gone."""
        self.serial += 1
        listing = self._folders.get(parent_of(path))
        if listing is not None:
            listing.unsure.add(nfc(path.rsplit("/", 1)[-1]))
        drop_folder(self._folders, path)

    def wrote(self, path: str, node: Any, serial: int) -> None:
        """This mount wrote ``node`` at ``path``, and the only change since ``serial`` (taken
        before the write) is that write's own ``changed``: the listing answers the name again
        with the new node (an editor's next save asks for it before its rename), while the next
        pass over the folder lists it afresh. Any other change meanwhile (an event that came
        first) leaves the name unsure."""
        if self.serial != serial + 1:
            return
        listing = self._fresh(parent_of(path))
        if listing is None:
            return
        name = nfc(path.rsplit("/", 1)[-1])
        listing.unsure.discard(name)
        listing.names[name] = node
        listing.relist = True

    def clear(self) -> None:
        self.serial += 1
        self._folders.clear()
