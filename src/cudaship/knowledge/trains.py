"""CUDA trains: the ``major.minor`` release line a build targets, written ``cu132`` or ``13.2`` (13.2.2)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import total_ordering

from cudaship.errors import KnowledgeError, UnknownTrainError


@total_ordering
@dataclass(frozen=True)
class Train:
    """A CUDA release line, optionally with the patch release: ``Train(13, 2)`` is ``cu132`` / ``13.2``.

    Ordered by (major, minor, patch) with a missing patch before any patch: ``13.2 < 13.2.0 < 13.2.2 < 13.4``.
    Equality includes the patch; compare :attr:`line` values to ignore it.
    """

    major: int
    minor: int
    patch: int | None = None

    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, -1 if self.patch is None else self.patch)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Train):
            return NotImplemented
        return self._key() < other._key()

    @property
    def tag(self) -> str:
        """The wheel local tag / index name: ``cu132``, ``cu118``."""
        return f"cu{self.major}{self.minor}"

    @property
    def version(self) -> str:
        """``13.2`` (without the patch)."""
        return f"{self.major}.{self.minor}"

    @property
    def full_version(self) -> str:
        """``13.2.2`` when the patch is known, else ``13.2``."""
        return self.version if self.patch is None else f"{self.version}.{self.patch}"

    @property
    def line(self) -> Train:
        """The same train without the patch (``13.2.2`` → ``13.2``)."""
        return Train(self.major, self.minor)

    def __str__(self) -> str:
        return self.tag


#: ``cu132``, and the same digits alone (``132``): what ``--train 128`` meant was never anything but 12.8
_TAG_RE = re.compile(r"^(?:cu)?(\d{2,4})$", re.IGNORECASE)
_VERSION_RE = re.compile(r"^(?:cuda[-_ ]?)?(\d{1,2})\.(\d{1,2})(?:\.(\d{1,3}))?$", re.IGNORECASE)


def parse_train(text: str) -> Train:
    """Parse ``cu132``, ``cu118``, ``cu92``, ``132``, ``13.2``, ``13.2.2`` (``CUDA 13.2``, ``cuda-13.2``).

    The one train parser: every command and every file cudaship reads goes through it. In a tag the last
    digit is the minor (``cu118`` and ``118`` are 11.8, ``cu132`` 13.2, ``cu92`` 9.2). A two-digit tag
    starting with 1 (``cu13``, ``12``) is refused: read that way it would be CUDA 1.x, and what was meant is a
    major alone (CUDA 13), which names no train; the message says to write ``cu130`` or ``13.0``. Anything
    else raises KnowledgeError naming the token. This says nothing about whether the data knows the train,
    or whether NVIDIA published it: see :func:`cudaship.knowledge.releases.require_train`.
    """
    token = text.strip()
    match = _TAG_RE.match(token)
    if match:
        digits = match.group(1)
        if len(digits) > 3:
            raise KnowledgeError(f"invalid CUDA train {text!r}: expected cuXY (cu132) or X.Y (13.2)")
        if len(digits) == 2 and digits[0] == "1":
            raise KnowledgeError(
                f"invalid CUDA train {text!r}: CUDA {digits} alone is no train, and as a tag it would be "
                f"1.{digits[1]}: write cu{digits}0 or {digits}.0"
            )
        major, minor, patch = int(digits[:-1]), int(digits[-1]), None
    else:
        match = _VERSION_RE.match(token)
        if not match:
            raise KnowledgeError(f"invalid CUDA train {text!r}: expected cuXY (cu132) or X.Y[.Z] (13.2.2)")
        major, minor = int(match.group(1)), int(match.group(2))
        patch = None if match.group(3) is None else int(match.group(3))
    if major < 1:
        raise KnowledgeError(f"invalid CUDA train {text!r}: major version 0")
    return Train(major, minor, patch)


def as_train(value: Train | str) -> Train:
    """``value`` if it is a Train, else :func:`parse_train` of it."""
    return value if isinstance(value, Train) else parse_train(value)


def train_list(trains: Iterable[Train]) -> str:
    """``11.8, 12.0, ..., 13.5`` (every train, oldest first; ``none`` when empty)."""
    versions = [t.version for t in sorted({t.line for t in trains})]
    return ", ".join(versions) if versions else "none"


def require_known(text: str, known: Iterable[Train], where: str, *, label: str = "--train") -> Train:
    """``text`` as a train that ``known`` holds (compared by release line), else an UnknownTrainError.

    The one rule for a train a command cannot serve, whatever the command: text that is no train at all and a
    train the command's data lacks are the same mistake, exit 4 (``ExitCode.UNKNOWN_TRAIN``), one message
    naming the value (``label``: the option or argument it came in), the data asked (``where``) and every
    train that data knows.
    """
    known = tuple(known)
    shown = f"{label} {text.strip()!r}"
    try:
        train = parse_train(text)
    except KnowledgeError as e:
        problem = f"not a CUDA train ({e.message.split(': ', 1)[-1]})"
        raise UnknownTrainError(f"{shown}: {problem}; {where} knows {train_list(known)}") from e
    if train.line not in {t.line for t in known}:
        problem = f"unknown CUDA train {train.version}"
        raise UnknownTrainError(f"{shown}: {problem}; {where} knows {train_list(known)}")
    return train
