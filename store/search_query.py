"""Search text made safe for websearch_to_tsquery, for note_find and record_search alike.

websearch_to_tsquery keeps each "-" (NOT) that has no word after it yet on a stack of 32 entries,
so a query with 33 or more hyphens between two words ("-----...", "- - - ...", "!-!-!-...") fails
with "tsquery stack too small", an internal error (a 500). Such a run means nothing a person
could want (a NOT of a NOT of nothing), so every run of separators that holds a hyphen is reduced
before the query reaches PostgreSQL: to " -" when it ends in a hyphen right before a word or a
quoted phrase (an exclusion, as typed), else to a space. Hyphens inside or after a word
("well-known", "v2-") and inside quoted phrases are kept as typed.
"""
from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[\W_]+")


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
        return " -" if run.endswith("-") and before_operand else " "
    return _SEPARATORS.sub(one, text)
