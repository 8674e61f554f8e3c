"""Search text made safe for websearch_to_tsquery, for note_find and record_search alike.

websearch_to_tsquery keeps each "-" (NOT) that has no word after it yet on a stack of 32 entries,
so a query with 33 or more hyphens between two words ("-----...", "- - - ...", "!-!-!-...") fails
with "tsquery stack too small", an internal error (a 500). Such a run means nothing a person
could want (a NOT of a NOT of nothing), so every run of separators that holds a hyphen is reduced
before the query reaches PostgreSQL: to " -" when PostgreSQL would read a NOT of the word or
quoted phrase after it (an exclusion, as typed: "-beta", "- beta", "--beta", "!-beta"), else to a
space. Hyphens inside or after a word ("well-known", "v2-") and inside quoted phrases are kept as
typed.

Where a hyphen is a NOT is websearch_to_tsquery's rule: a space-separated piece of the query
opens with operators ("-" a NOT; "!", "&", "|", "(", ")" and "<" skipped), and what follows
them is a word. A piece of other punctuation ("-," in "alpha -, beta") is a word with no letters,
which takes the NOTs before it and gives nothing: beta is not excluded. A hyphen after a word, or
after punctuation that opens a word (",-beta"), belongs to that word and is no NOT either.
"""
from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[\W_]+")
# What websearch_to_tsquery skips before a word, "-" being its NOT.
_OPERATORS = "-!&|()<"


def websearch_text(query: str) -> str:
    """``query`` with every run of NOT operators reduced to at most one."""
    parts = query.split('"')
    for i in range(0, len(parts), 2):  # even parts are outside quotes
        parts[i] = _reduce(parts[i], before_quote=i + 1 < len(parts))
    return '"'.join(parts)


def _reduce(text: str, *, before_quote: bool) -> str:
    def one(m: re.Match[str]) -> str:
        run = m.group()
        if "-" not in run:
            return run
        after_word = m.start() > 0 and text[m.start() - 1].isalnum()
        if after_word and run.strip("-") == "":
            return run  # a hyphenated word, or hyphens trailing one: part of the word for PostgreSQL
        before_operand = m.end() < len(text) or before_quote
        glued = m.end() < len(text) and not run[-1].isspace()   # its last piece opens the next word
        return " -" if before_operand and _excludes(run, after_word=after_word, glued=glued) else " "
    return _SEPARATORS.sub(one, text)


def _excludes(run: str, *, after_word: bool, glued: bool) -> bool:
    """Whether websearch_to_tsquery reads ``run`` (separators right before a word or a phrase) as
    a NOT of that word or phrase, by the rule the module's docstring gives."""
    pieces = run.split()
    if after_word and not run[0].isspace():
        pieces = pieces[1:]   # the end of the word before the run
    negated = False
    for i, piece in enumerate(pieces):
        word = piece.lstrip(_OPERATORS)
        negated = negated or "-" in piece[:len(piece) - len(word)]
        if word and not (glued and i == len(pieces) - 1):
            negated = False   # a word of punctuation only took the NOT, and is nothing
    return negated
