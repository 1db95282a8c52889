"""A distribution's METADATA and file list, from a wheel (local or remote) or an installed ``.dist-info``."""

from __future__ import annotations

from collections.abc import Sequence
from email.parser import HeaderParser

from packaging.utils import canonicalize_name

from cudaship.errors import WheelError
from cudaship.providers.records import Distribution
from cudaship.wheel.metadata import MAX_METADATA_BYTES, MAX_REQUIREMENTS, find_dist_info, install_path


def parse_core_metadata(data: bytes) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    """(canonical name, version, Requires-Dist, Provides-Extra) of a METADATA file, held to the caps of
    :func:`cudaship.wheel.metadata.parse_metadata` (size, Requires-Dist count and length)."""
    if len(data) > MAX_METADATA_BYTES:
        raise WheelError(f"METADATA is {len(data)} bytes, over the {MAX_METADATA_BYTES} byte limit")
    message = HeaderParser().parsestr(data.decode("utf-8", errors="replace"))
    name = (message.get("Name") or "").strip()
    version = (message.get("Version") or "").strip()
    if not name or not version:
        raise WheelError("METADATA has no Name or Version")
    raw_requires = message.get_all("Requires-Dist") or ()
    if len(raw_requires) > MAX_REQUIREMENTS:
        raise WheelError(f"METADATA has {len(raw_requires)} Requires-Dist entries, over {MAX_REQUIREMENTS}")
    requires = tuple(" ".join(str(v).split()) for v in raw_requires)
    extras = tuple(canonicalize_name(str(v).strip()) for v in message.get_all("Provides-Extra") or ())
    return canonicalize_name(name), version, requires, extras


def from_wheel_names(names: Sequence[str], filename: str, source: str, metadata: bytes) -> Distribution:
    """A distribution from a wheel's member names and its METADATA (read by the caller, within its cap)."""
    directory = find_dist_info(names, filename)
    name, version, requires, extras = parse_core_metadata(metadata)
    files = []
    for member in names:
        if member.endswith("/"):
            continue
        path = install_path(member, directory)
        if path is not None:
            files.append(path)
    return Distribution(name, version, requires, tuple(sorted(files)), source, extras)
