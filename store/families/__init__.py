"""The families of files in the Host tree, one object each, and which folders hold which.

``family_for(folder, name)`` is the one place a folder and a name become a kind of file; the tree
(store.host) then speaks only the Family interface (store.families.base)."""
from __future__ import annotations

from store.errors import NotANote, ReadOnly
from store.families.base import Family
from store.families.collection import CollectionFile, Records
from store.families.history import History
from store.families.memory import Memory
from store.families.notes import Notes
from store.families.scripts import Scripts
from store.families.task import Task
from store.layout import SHAPES, Folder, FolderKind

NOTES, SCRIPTS, TASK, MEMORY, HISTORY = Notes(), Scripts(), Task(), Memory(), History()
COLLECTION, RECORDS = CollectionFile(), Records()

# The files each kind of folder holds: a family with a fixed name first, then the one that takes
# every other name. Folders not listed hold folders only.
FILES: dict[FolderKind, tuple[Family, ...]] = {
    "org": (NOTES,),
    "guild": (NOTES,),
    "agent": (TASK, MEMORY, NOTES),
    "scripts": (SCRIPTS,),
    "history": (HISTORY,),
    "collection": (COLLECTION, RECORDS),
}


def families_in(folder: Folder) -> tuple[Family, ...]:
    return FILES.get(folder.kind, ())


def family_for(folder: Folder, name: str, *, for_write: bool) -> Family:
    """The family ``name`` in ``folder`` belongs to, or the refusal a person reads: NotANote for a
    name no family there takes, ReadOnly for a write to a read-only family."""
    held = families_in(folder)
    if not held:
        holds = SHAPES[folder.kind].holds.format(org=folder.org_id)
        raise NotANote(f"/{folder.path} {holds}")
    family = next((f for f in held if f.fixed_name == name), None) or next(f for f in held if f.fixed_name is None)
    if for_write and not family.writable:
        raise ReadOnly(family.read_only_sentence(folder))
    problem = family.name_problem(folder, name)
    if problem:
        raise NotANote(problem)
    return family
