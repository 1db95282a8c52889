"""Where each source's files go in a toolkit, the links that finish it, and the environment it needs.

Layout: ``bin/``, ``include/``, ``lib/`` (+ ``nvvm/``, ...). Linux: ``lib64`` links to ``lib`` (nvcc.profile
searches ``lib64``), and each ``libX.so.N`` gets the ``libX.so`` development link a linker looks for. Windows,
CUDA 13 and later: DLLs in ``bin/x64`` (where the CUDA 13 installer puts them), import libraries in
``lib/x64``. Licenses of each component in ``licenses/<component>/``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path, PureWindowsPath

from cudaship.toolkit.extract import Remap
from cudaship.toolkit.records import Platform

_SONAME = re.compile(r"^(lib[\w+.-]*?\.so)((?:\.\d+)+)$")
_SKIP_TREE_FILES = {"__init__.py"}


def _common(rel: str, platform: Platform, major: int, component: str) -> str | None:
    if "/" not in rel:  # top-level files of an archive: LICENSE, README, version.json
        return f"licenses/{component}/{rel}"
    head, _, rest = rel.partition("/")
    if head == "lib64" and not platform.is_windows:
        return f"lib/{rest}"
    if platform.is_windows and head == "bin":
        if rest.startswith("x86_64/"):
            rest = "x64/" + rest[len("x86_64/") :]
        if major >= 13 and "/" not in rest and rest.lower().endswith(".dll"):
            rest = f"x64/{rest}"
        return f"bin/{rest}"
    return rel


def redist_remap(platform: Platform, major: int, component: str) -> Remap:
    """Paths inside a redist archive (top directory already stripped) -> toolkit paths."""

    def remap(rel: str) -> str | None:
        return _common(rel, platform, major, component)

    return remap


def pypi_remap(platform: Platform, major: int, component: str) -> Remap:
    """Paths inside a wheel -> toolkit paths (``nvidia/cu13/...`` for 13, ``nvidia/<pkg>/...`` for 12)."""

    def remap(rel: str) -> str | None:
        parts = rel.split("/")
        if parts[0].endswith(".dist-info"):
            if len(parts) >= 3 and parts[1] == "licenses":
                return f"licenses/{component}/{'/'.join(parts[2:])}"
            if len(parts) == 2 and parts[1].lower().startswith(("license", "copying", "notice")):
                return f"licenses/{component}/{parts[1]}"
            return None
        if parts[0] != "nvidia" or len(parts) < 3:
            return None
        tree = parts[2:]
        if tree[0] == ".metadata" or "__pycache__" in tree or tree[-1] in _SKIP_TREE_FILES:
            return None
        return _common("/".join(tree), platform, major, component)

    return remap


def _link_or_copy(target: str, path: Path) -> None:
    """A relative symlink; a copy where the host cannot make one (Windows without Developer Mode)."""
    try:
        os.symlink(target, path, target_is_directory=(path.parent / target).is_dir())
    except OSError:  # pragma: no cover - hosts without symlink support
        source = path.parent / target
        if source.is_dir():
            shutil.copytree(source, path, symlinks=True)
        else:
            shutil.copy2(source, path)


def finish(root: Path, platform: Platform) -> dict[str, str]:
    """Create the links build tools expect; returns them (toolkit path -> target)."""
    links: dict[str, str] = {}
    if platform.is_windows:
        return links
    lib = root / "lib"
    if lib.is_dir() and not (root / "lib64").exists() and not (root / "lib64").is_symlink():
        _link_or_copy("lib", root / "lib64")
        links["lib64"] = "lib"
    if lib.is_dir():
        best: dict[str, str] = {}
        for entry in sorted(lib.iterdir()):
            match = _SONAME.match(entry.name)
            if match and (entry.is_file() or entry.is_symlink()):
                dev = match.group(1)
                if dev not in best or len(entry.name) < len(best[dev]):
                    best[dev] = entry.name
        for dev, target in sorted(best.items()):
            if not (lib / dev).exists() and not (lib / dev).is_symlink():
                _link_or_copy(target, lib / dev)
                links[f"lib/{dev}"] = target
    return links


def env_vars(root: Path, platform: Platform) -> tuple[dict[str, str], list[str], list[str]]:
    """(variables, PATH entries to prepend, notes) for a toolkit at ``root``. Only what is there is
    exported: a ``bin`` (or ``bin/x64``) that does not exist is not put on PATH, and ``CUDACXX`` is set only
    when the platform's ``nvcc`` is a file; each thing left out gets a note saying what and why."""
    root_text = str(root)
    if platform.is_windows and os.name == "nt":  # pragma: no cover - Windows host
        root_text = str(PureWindowsPath(root))
    notes: list[str] = []
    bins: list[str] = []
    if (root / "bin").is_dir():
        bins.append(str(root / "bin"))
    else:
        notes.append(f"PATH: left out {root / 'bin'}: it does not exist (no component here has programs)")
    if platform.is_windows and (root / "bin" / "x64").is_dir():  # CUDA 13's DLLs; CUDA 12 keeps them in bin
        bins.append(str(root / "bin" / "x64"))
    variables = {"CUDA_HOME": root_text, "CUDA_PATH": root_text}
    nvcc = root / "bin" / ("nvcc.exe" if platform.is_windows else "nvcc")
    if nvcc.is_file():
        variables["CUDACXX"] = str(nvcc)
    else:
        notes.append(f"CUDACXX: not set: {nvcc} does not exist (this toolkit has no nvcc component)")
    return variables, bins, notes
