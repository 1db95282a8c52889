"""The policy's glob patterns, compiled once and matched in time linear in the path.

A regular expression translated from a glob (what :mod:`fnmatch` and a naive translation produce) can
backtrack: ``*a*a*a*a*a*b`` against a long path of ``a`` costs exponential time, and a class such as
``[z-a]`` does not compile at all. Here a pattern becomes a list of tokens, checked when the policy is
loaded (:class:`GlobError` says what is wrong), and a path is matched by simulating the pattern's
automaton with every state at once: each state is a bit of an integer, each character of the path a few
integer operations over ``len(pattern)`` bits. No input can make a match cost more than
``len(path) x len(pattern) / 64`` word operations; nothing backtracks.

Syntax (docs/policy.md): ``*`` any run of characters but ``/``; ``**`` any run, ``/`` included; ``**/`` any
number of whole directories (none included); ``?`` one character but ``/``; ``[abc]``, ``[a-z]``,
``[!a-z]`` one character of (not of) the class, ``]`` first in the class is a member; a ``[`` without a
closing ``]`` is itself. In flat patterns (symbol names) ``*`` and ``?`` match ``/`` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

#: Longest pattern accepted: the policy's globs are paths and names, a few dozen characters.
MAX_PATTERN = 1024

_LIT, _ANY, _CLASS, _STAR, _DSTAR, _DSLASH = range(6)


class GlobError(ValueError):
    """A pattern that cannot be compiled; the message says why (the policy names the key)."""


@dataclass(frozen=True)
class _Class:
    negate: bool
    members: frozenset[str]
    ranges: tuple[tuple[str, str], ...]

    def holds(self, c: str) -> bool:
        inside = c in self.members or any(lo <= c <= hi for lo, hi in self.ranges)
        return inside != self.negate


def _parse_class(pattern: str, start: int) -> tuple[_Class, int] | None:
    """The class opening at ``pattern[start] == '['`` and the index after its ``]``; None when unclosed."""
    i = start + 1
    negate = i < len(pattern) and pattern[i] == "!"
    if negate:
        i += 1
    body_start = i
    if i < len(pattern) and pattern[i] == "]":  # ']' first is a member
        i += 1
    end = pattern.find("]", i)
    if end == -1:
        return None
    body = pattern[body_start:end]
    members: set[str] = set()
    ranges: list[tuple[str, str]] = []
    j = 0
    while j < len(body):
        if j + 2 < len(body) and body[j + 1] == "-":
            lo, hi = body[j], body[j + 2]
            if lo > hi:
                raise GlobError(
                    f"bad range {lo}-{hi} in {pattern[start : end + 1]!r} (write the lower end first)"
                )
            ranges.append((lo, hi))
            j += 3
        else:
            members.add(body[j])
            j += 1
    if not members and not ranges:
        raise GlobError(f"empty character class {pattern[start : end + 1]!r}")
    return _Class(negate, frozenset(members), tuple(ranges)), end + 1


class Glob:
    """A compiled pattern; :meth:`match` is linear in the path."""

    def __init__(self, pattern: str, *, ignore_case: bool = False, flat: bool = False) -> None:
        if len(pattern) > MAX_PATTERN:
            raise GlobError(f"pattern of {len(pattern)} characters, longer than {MAX_PATTERN}")
        self.pattern = pattern
        self.ignore_case = ignore_case
        self.flat = flat
        tokens: list[tuple[int, object]] = []
        i = 0
        text = pattern
        while i < len(text):
            c = text[i]
            if c == "*":
                if text.startswith("**", i) and not flat:
                    i += 2
                    if text.startswith("/", i):
                        tokens.append((_DSLASH, None))
                        i += 1
                    elif not (tokens and tokens[-1][0] == _DSTAR):
                        tokens.append((_DSTAR, None))
                    continue
                if not (tokens and tokens[-1][0] in (_STAR, _DSTAR)):
                    tokens.append((_STAR, None))
                i += 1
            elif c == "?":
                tokens.append((_ANY, None))
                i += 1
            elif c == "[":
                parsed = _parse_class(pattern, i)
                if parsed is None:
                    tokens.append((_LIT, c))
                    i += 1
                else:
                    tokens.append((_CLASS, parsed[0]))
                    i = parsed[1]
            else:
                tokens.extend((_LIT, ch) for ch in (c.lower() if ignore_case else c))
                i += 1
        self._tokens = tokens
        m = len(tokens)
        self._m = m
        self._accept = 1 << m
        literal = all(kind == _LIT for kind, _ in tokens)
        self._literal = "".join(str(data) for _, data in tokens) if literal else None
        epsilon = dslash = star = dstar = 0
        for pos, (kind, _) in enumerate(tokens):
            bit = 1 << pos
            if kind in (_STAR, _DSTAR, _DSLASH):
                epsilon |= bit
            if kind == _DSLASH:
                dslash |= bit
            elif kind == _STAR:
                star |= bit
            elif kind == _DSTAR:
                dstar |= bit
        self._epsilon = epsilon
        self._dslash = dslash
        self._star = star
        self._dstar = dstar
        self._advance: dict[str, int] = {}  # per character: the tokens that consume it and move on
        self.steps = 0  #: characters consumed over every match (work, counted for the tests)

    def _advance_mask(self, c: str) -> int:
        mask = self._advance.get(c)
        if mask is not None:
            return mask
        mask = 0
        slash = c == "/" and not self.flat
        for pos, (kind, data) in enumerate(self._tokens):
            if kind == _LIT:
                hit = data == c
            elif kind == _ANY:
                hit = not slash
            elif kind == _CLASS:
                assert isinstance(data, _Class)
                hit = data.holds(c) or (self.ignore_case and data.holds(c.upper()))
            elif kind == _DSLASH:
                hit = c == "/"
            else:
                hit = False
            if hit:
                mask |= 1 << pos
        if len(self._advance) < 4096:
            self._advance[c] = mask
        return mask

    def _close(self, states: int) -> int:
        """Add the states reached without consuming: past each ``*``, ``**`` and ``**/``."""
        while True:
            more = states | ((states & self._epsilon) << 1)
            if more == states:
                return states
            states = more

    def match(self, path: str) -> bool:
        text = path.lower() if self.ignore_case else path
        if self._literal is not None:
            return text == self._literal
        m1 = self._m + 1
        states = self._close(1)  # entry states in bits 0..m; "inside **/" states in bits m+1..2m+1
        for c in text:
            self.steps += 1
            entry = states & ((1 << m1) - 1)
            inside = states >> m1
            slash = c == "/" and not self.flat
            nxt = (entry & self._advance_mask(c)) << 1
            nxt |= entry & (self._dstar | (0 if slash else self._star))
            if c == "/":
                nxt |= (inside & self._dslash) << 1
            nxt |= ((entry | inside) & self._dslash) << m1
            if not nxt:
                return False
            states = self._close(nxt & ((1 << m1) - 1)) | (nxt & ~((1 << m1) - 1))
        return bool(states & self._accept)


def compile_glob(pattern: str, *, ignore_case: bool = False, flat: bool = False) -> Glob:
    """The compiled pattern (each compiled once per process); :class:`GlobError` when it cannot be."""
    return _compiled(pattern, ignore_case, flat)


@lru_cache(maxsize=8192)
def _compiled(pattern: str, ignore_case: bool, flat: bool) -> Glob:
    return Glob(pattern, ignore_case=ignore_case, flat=flat)
