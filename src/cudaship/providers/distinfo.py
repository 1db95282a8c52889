"""A distribution's METADATA and file list, from a wheel (local or remote) or an installed ``.dist-info``."""

from __future__ import annotations

import zipfile
from email.parser import HeaderParser

from packaging.utils import canonicalize_name

from cudaship.errors import WheelError
from cudaship.providers.records import Distribution
from cudaship.wheel.metadata import find_dist_info, install_path


def parse_core_metadata(data: bytes) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    """(canonical name, version, Requires-Dist, Provides-Extra) of a METADATA file."""
    message = HeaderParser().parsestr(data.decode("utf-8", errors="replace"))
    name = (message.get("Name") or "").strip()
    version = (message.get("Version") or "").strip()
    if not name or not version:
        raise WheelError("METADATA has no Name or Version")
    requires = tuple(" ".join(str(v).split()) for v in message.get_all("Requires-Dist") or ())
    extras = tuple(canonicalize_name(str(v).strip()) for v in message.get_all("Provides-Extra") or ())
    return canonicalize_name(name), version, requires, extras


def from_wheel_zip(
    zf: zipfile.ZipFile, filename: str, source: str, metadata: bytes | None = None
) -> Distribution:
    """A distribution from a wheel's central directory; METADATA is read from it unless given (PEP 658)."""
    names = zf.namelist()
    directory = find_dist_info(names, filename)
    if metadata is None:
        try:
            metadata = zf.read(f"{directory}/METADATA")
        except KeyError:
            raise WheelError(f"{directory}/METADATA is missing") from None
    name, version, requires, extras = parse_core_metadata(metadata)
    files = []
    for member in names:
        if member.endswith("/"):
            continue
        path = install_path(member, directory)
        if path is not None:
            files.append(path)
    return Distribution(name, version, requires, tuple(sorted(files)), source, extras)
