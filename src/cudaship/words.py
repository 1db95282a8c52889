"""Counted nouns and cut lists for every message and report: one place decides "1 file" / "2 files" and what
"... and 3 more" says, so no renderer or check writes ``{n} files`` or ``file(s)`` itself.

Pure functions of their arguments; English only.
"""

from __future__ import annotations

from collections.abc import Sequence

_ES_ENDINGS = ("s", "x", "z", "ch", "sh")


def plural_of(noun: str) -> str:
    """The plural of ``noun``'s last word: ``file`` → ``files``, ``library`` → ``libraries``, ``copy`` →
    ``copies``, ``match`` → ``matches``, ``native file`` → ``native files``."""
    head, _, last = noun.rpartition(" ")
    lower = last.lower()
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        word = last[:-1] + "ies"
    elif lower.endswith(_ES_ENDINGS):
        word = last + "es"
    else:
        word = last + "s"
    return f"{head} {word}" if head else word


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 file``, ``0 files``, ``2 native libraries``: the number and ``noun`` agreeing with it (``plural``
    where the regular form of :func:`plural_of` is wrong: ``count(2, "child", "children")``)."""
    return f"{n} {noun if n == 1 else (plural or plural_of(noun))}"


def agree(n: int, singular: str, plural: str) -> str:
    """The verb or pronoun form that agrees with ``n`` things: ``agree(1, "resolves", "resolve")``."""
    return singular if n == 1 else plural


def cut_list(items: Sequence[str], limit: int, *, where: str | None = None) -> str:
    """``a, b, c`` when ``items`` has at most ``limit`` entries, else the first ``limit`` and ``and N more``,
    followed by where the rest are listed when the caller names it (``and 3 more (-v lists them)``): a cut
    list never hides entries the report shows nowhere else, so a caller without such a place passes a
    ``limit`` of ``len(items)``."""
    shown = ", ".join(items[:limit])
    rest = len(items) - limit
    if rest <= 0:
        return shown
    return f"{shown} and {rest} more" + (f" ({where})" if where else "")
