"""Counted nouns, cut lists and sizes for every message and report: one place decides "1 file" / "2 files",
what "... and 3 more" says and how a number of bytes reads (``501,816 bytes``, ``14.2 MiB``), so no renderer
or check writes ``{n} files``, ``file(s)``, ``MB`` or ``KiB`` itself.

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


def count(n: int, noun: str, plural: str | None = None, *, grouped: bool = False) -> str:
    """``1 file``, ``0 files``, ``2 native libraries``: the number and ``noun`` agreeing with it (``plural``
    where the regular form of :func:`plural_of` is wrong: ``count(2, "child", "children")``; ``grouped``:
    thousands separators, ``5,201 wheels``, for counts that run into thousands)."""
    number = f"{n:,}" if grouped else str(n)
    return f"{number} {noun if n == 1 else (plural or plural_of(noun))}"


def byte_count(n: int) -> str:
    """An exact number of bytes, with thousands separators: ``1 byte``, ``501,816 bytes``."""
    return f"{n:,} {'byte' if n == 1 else 'bytes'}"


#: The one unit family of sizes: binary (1 KiB = 1,024 bytes), as the Linux tools and PyPI's own limits count.
_UNITS = (("GiB", 30), ("MiB", 20), ("KiB", 10))


def size(n: int) -> str:
    """A size to read at a glance, in binary units with one decimal: ``812 bytes``, ``14.2 KiB``, ``3.1 MiB``,
    ``1,204.5 GiB`` (below 1 KiB, the exact :func:`byte_count`)."""
    for unit, shift in _UNITS:
        if abs(n) >= 1 << shift:
            return f"{n / (1 << shift):,.1f} {unit}"
    return byte_count(n)


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


def _top_level_split(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` where it is outside parentheses and brackets."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]" and depth:
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def shorten(text: str, limit: int, *, where: str) -> str:
    """``text`` when it has at most ``limit`` characters, else a shorter line that keeps its start and counts
    what it leaves out, saying ``where`` the whole is. A list of five or more ``;``-separated parts is cut to
    its first parts and ``and N more (where)``; else a list of four or more ``,``-separated items after the
    last ``: `` (``needed only by ...: a, b, c, d``) is cut the same way; a line still over twice ``limit`` is
    cut at a word with ``... (where)``. Separators inside parentheses or brackets never split, and a cut
    always leaves out at least two entries (one entry's room would say less than the entry)."""
    if len(text) <= limit:
        return text
    parts = _top_level_split(text, "; ")
    if len(parts) >= 5:
        for keep in range(len(parts) - 2, 0, -1):
            cut = f"{'; '.join(parts[:keep])}; and {len(parts) - keep} more ({where})"
            if len(cut) <= limit:
                return cut
    heads = _top_level_split(text, ": ")
    one_list = len(heads) > 1 and len(_top_level_split(heads[-1], "; ")) == 1
    items = _top_level_split(heads[-1], ", ") if one_list else []
    if len(items) >= 4:
        head = ": ".join(heads[:-1]) + ": "
        for keep in range(len(items) - 2, 0, -1):
            cut = f"{head}{cut_list(items, keep, where=where)}"
            if len(cut) <= limit:
                return cut
    if len(text) <= 2 * limit:
        return text
    room = 2 * limit - len(where) - 6
    head = text[:room].rsplit(" ", 1)[0] if " " in text[:room] else text[:room]
    return f"{head.rstrip(',;:')} ... ({where})"
