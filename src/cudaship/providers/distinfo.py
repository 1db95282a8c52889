"""A distribution as provider resolution sees it (name, version, Requires-Dist, installed files), from a
wheel's member names or an installed ``.dist-info``; METADATA and the dist-info directory are read by
:mod:`cudaship.wheel.metadata`, the one parser of them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from packaging.utils import canonicalize_name

from cudaship.providers.records import Distribution
from cudaship.wheel.metadata import find_dist_info, install_path, parse_metadata
from cudaship.wheel.records import Metadata


def read_metadata(data: bytes) -> Metadata:
    """A dependency's METADATA: any Version taken as written (legacy versions exist among installed
    distributions; they are skipped where versions are compared)."""
    return parse_metadata(data, strict=False)


def distribution(metadata: Metadata, files: Iterable[str], source: str) -> Distribution:
    """The distribution ``metadata`` describes (canonical name and extras), installing ``files``."""
    extras = tuple(canonicalize_name(e) for e in metadata.provides_extra)
    return Distribution(
        canonicalize_name(metadata.name),
        metadata.version,
        metadata.requires_dist,
        tuple(sorted(files)),
        source,
        extras,
    )


def from_wheel_names(names: Sequence[str], filename: str, source: str, metadata: bytes) -> Distribution:
    """A distribution from a wheel's member names and its METADATA (read by the caller, within its cap)."""
    directory = find_dist_info(names, filename)
    meta = read_metadata(metadata)
    files = []
    for member in names:
        if member.endswith("/"):
            continue
        path = install_path(member, directory)
        if path is not None:
            files.append(path)
    return distribution(meta, files, source)
