"""The PyPI source: NVIDIA's wheels, through pip's configured index, for any target platform.

Which wheels make a release comes from NVIDIA itself: the ``cuda-toolkit==<release>`` metapackage lists, per
extra (``nvcc``, ``cudart``, ...), the exact ``nvidia-*`` versions. pip runs as a subprocess (``pip download
--no-deps --only-binary=:all: --platform ...``) so that its index, proxy and certificate settings apply.
Each wheel's RECORD is checked (every file listed, every sha256 matching) before anything is extracted.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from cudaship.errors import ToolkitError, WheelError
from cudaship.hashing import sha256_file
from cudaship.knowledge import toolkit_data
from cudaship.toolkit.records import Artifact, Observer, Platform
from cudaship.wheel.archive import WheelArchive
from cudaship.wheel.metadata import MAX_METADATA_BYTES, find_dist_info, parse_metadata

METAPACKAGE = "cuda-toolkit"


@dataclass(frozen=True)
class PipOptions:
    python: str = sys.executable  #: the Python whose pip runs
    offline: bool = False  #: only wheels already in the cache directory
    extra_args: tuple[str, ...] = ()  #: e.g. ("--index-url", URL)
    timeout: float = 1800.0


def _pip_download(
    requirements: list[str], dest: Path, platform: Platform | None, options: PipOptions, observer: Observer
) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    command = [
        options.python,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "-d",
        str(dest),
    ]
    if platform is not None:
        for tag in platform.pypi_platform_tags:
            command += ["--platform", tag]
        command += ["--python-version", f"{sys.version_info.major}.{sys.version_info.minor}"]
    if options.offline:
        command += ["--no-index", "--find-links", str(dest)]
    command += list(options.extra_args)
    command += ["--", *requirements]
    observer.stage(f"pip download {' '.join(requirements)}")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=options.timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolkitError(f"cannot run pip: {e}") from e
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")] or lines[-1:] or ["no output"]
        where = " (offline: only the cache)" if options.offline else ""
        raise ToolkitError(f"pip download {' '.join(requirements)} failed{where}: {errors[0]}")


def _best_wheel(directory: Path, requirement: Requirement, platform: Platform | None) -> Path | None:
    """The newest wheel in ``directory`` that satisfies ``requirement`` and fits ``platform``."""
    wanted = canonicalize_name(requirement.name)
    allowed = set(platform.pypi_platform_tags) if platform is not None else None
    best: tuple[Version, Path] | None = None
    for path in directory.glob("*.whl"):
        try:
            name, version, _build, tags = parse_wheel_filename(path.name)
        except InvalidWheelFilename:
            continue
        if name != wanted or not requirement.specifier.contains(version, prereleases=True):
            continue
        if allowed is not None and not any(t.platform in allowed or t.platform == "any" for t in tags):
            continue
        if best is None or version > best[0]:
            best = (version, path)
    return best[1] if best else None


def _metadata_requirements(wheel: Path) -> list[Requirement]:
    try:
        with WheelArchive(wheel) as archive:
            directory = find_dist_info((m.name for m in archive.members()), wheel.name)
            data = archive.data_member(f"{directory}/METADATA", MAX_METADATA_BYTES)
            if data is None:
                raise ToolkitError(f"{wheel.name}: no single .dist-info/METADATA")
            metadata = parse_metadata(data)
    except WheelError as e:
        raise ToolkitError(f"{wheel.name}: unreadable wheel: {e.message}") from e
    requirements = []
    for line in metadata.requires_dist:
        try:
            requirements.append(Requirement(line))
        except InvalidRequirement as e:
            raise ToolkitError(f"{wheel.name}: bad Requires-Dist {line!r}: {e}") from e
    return requirements


def _check_published(component: str, release: str) -> toolkit_data.SourceName:
    """The PyPI name of ``component`` in ``release``; ToolkitError when there is none or its package lacks
    what the component provides (``bin/nvcc``)."""
    name = toolkit_data.source_name(component, "pypi", release)
    if name is None:
        raise ToolkitError(
            f"component {component} is not published on PyPI for CUDA {release}; try --source redist"
        )
    if name.lacks:
        why = f" ({name.note})" if name.note else ""
        raise ToolkitError(
            f"component {component} cannot be assembled from PyPI for CUDA {release}: {name.name} lacks "
            f"{', '.join(name.lacks)}{why}; use --source redist (NVIDIA's archives, or --mirror URL|DIR)"
        )
    return name


def plan(
    release: str,
    platform: Platform,
    components: tuple[str, ...],
    cache_dir: Path,
    options: PipOptions,
    observer: Observer,
) -> tuple[list[Artifact], list[str]]:
    """Download the wheels for ``components`` of ``release``; (artifacts, notes about skipped components).

    A component that cannot come from PyPI in ``release`` (none published, or its package ``lacks`` what the
    component provides: the CUDA 11/12 nvcc wheels hold no ``bin/nvcc``) is refused from the data alone,
    before pip asks any index."""
    for component in components:
        _check_published(component, release)
    meta_dir = cache_dir / "meta"
    meta_req = Requirement(f"{METAPACKAGE}=={release}")
    _pip_download([str(meta_req)], meta_dir, None, options, observer)
    meta = _best_wheel(meta_dir, meta_req, None)
    if meta is None:
        raise ToolkitError(f"pip did not leave a {METAPACKAGE} {release} wheel in {meta_dir}")
    requirements = _metadata_requirements(meta)
    environment: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    environment.update(platform.marker_environment)

    wanted: dict[str, SpecifierSet] = {}
    owner: dict[str, str] = {}
    notes: list[str] = []
    for component in components:
        name = _check_published(component, release)
        if name.included_in is not None:
            notes.append(f"{component} is part of {name.included_in} in CUDA {release}")
            continue
        if name.note:
            observer.warning(f"{component}: {name.note}")
        extra = name.extra or component
        chosen = [
            r
            for r in requirements
            if r.marker is not None and r.marker.evaluate({**environment, "extra": extra})
        ]
        if not chosen:
            raise ToolkitError(
                f"{METAPACKAGE} {release} has no wheels for component {component} (extra [{extra}]) "
                f"on {platform.value}"
            )
        for requirement in chosen:
            project = canonicalize_name(requirement.name)
            wanted[project] = wanted.get(project, SpecifierSet()) & requirement.specifier
            if project not in owner or project == canonicalize_name(name.name or ""):
                owner[project] = component
    wheels_dir = cache_dir / "wheels"
    specs = [f"{project}{spec}" for project, spec in sorted(wanted.items())]
    _pip_download(specs, wheels_dir, platform, options, observer)
    artifacts: list[Artifact] = []
    for spec in specs:
        requirement = Requirement(spec)
        wheel = _best_wheel(wheels_dir, requirement, platform)
        if wheel is None:
            raise ToolkitError(f"pip did not leave a wheel for {spec} ({platform.value}) in {wheels_dir}")
        _name, version, _b, _t = parse_wheel_filename(wheel.name)
        project = canonicalize_name(requirement.name)
        artifacts.append(
            Artifact(
                component=owner[project],
                name=str(project),
                version=str(version),
                filename=wheel.name,
                url=str(wheel),
                sha256=sha256_file(wheel),
                size=wheel.stat().st_size,
            )
        )
    return artifacts, notes


#: How each kind of RECORD problem reads in the one-line error of a refused wheel
_RECORD_WORDS = {
    "hash": "{path} does not match its RECORD hash",
    "size": "{path} does not match its RECORD hash",
    "unlisted": "{path} is not listed in RECORD",
    "unhashed": "RECORD gives no strong hash for {path}",
    "missing": "RECORD lists {path}, which the wheel lacks",
}


def verify_record(wheel: Path) -> None:
    """Check the wheel's RECORD: every member listed with a hash that matches; else ToolkitError (the first
    problem). RECORD is read and checked by :mod:`cudaship.wheel.metadata`, the wheel through the archive
    layer."""
    label = wheel.name
    try:
        with WheelArchive(wheel) as archive:
            problems = archive.record_problems(archive.read_dist_info())
    except WheelError as e:
        raise ToolkitError(f"{label}: unreadable wheel: {e.message}") from e
    for problem in problems:
        if problem.kind == "missing" and problem.path.endswith("/"):
            continue  # a directory RECORD names: a zip holds no file for it
        words = _RECORD_WORDS.get(problem.kind)
        raise ToolkitError(f"{label}: {words.format(path=problem.path) if words else problem.message}")
