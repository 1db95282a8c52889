"""Member selection: which archive members are worth reading as binaries (by name, then by first bytes)."""

from __future__ import annotations

import re

from cudaship.binary.magic import binary_format

#: Bytes read at the start of a member to recognise it.
MAGIC_BYTES = 16

#: Member names worth opening whatever their first bytes say.
_NATIVE_NAME = re.compile(
    r"(?:\.so(?:\.[0-9][0-9A-Za-z.]*)?|\.dll|\.pyd|\.exe|\.dylib|\.cubin|\.fatbin|\.ptx|\.lib)$",
    re.IGNORECASE,
)
#: Member names never worth a look (text, sources, metadata): saves opening thousands of members.
_TEXT_NAME = re.compile(
    r"(?:\.py|\.pyi|\.pyc|\.txt|\.md|\.rst|\.json|\.toml|\.cfg|\.ini|\.yaml|\.yml|\.h|\.hpp|\.hh|\.cuh|\.inl"
    r"|\.c|\.cc|\.cpp|\.cu|\.cmake|\.html|\.css|\.js|\.typed|/RECORD|/METADATA|/WHEEL|/LICENSE[^/]*)$",
    re.IGNORECASE,
)


def is_text_name(name: str) -> bool:
    """A member name that is never a binary (sources, text, metadata)."""
    return bool(_TEXT_NAME.search(name))


def looks_native(name: str, head: bytes) -> bool:
    """Whether a member named ``name`` starting with ``head`` is a file inspect should read: a binary by
    name, or by its first bytes (:func:`cudaship.binary.magic.binary_format`; PTX only by name)."""
    return bool(_NATIVE_NAME.search(name)) or binary_format(head) is not None


def is_native_member(name: str, head: bytes) -> bool:
    """Whether a member is worth reading as a binary: never text, sources or metadata by name; else a binary
    by name or by its first bytes (``head``, at least :data:`MAGIC_BYTES` of them when the member is that
    long)."""
    return not is_text_name(name) and looks_native(name, head)
