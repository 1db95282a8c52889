"""Assembling a toolkit: plan, fetch and verify everything, extract into staging, then move into place.

Order of an install: take the lock; resolve the artifacts (redist manifest or PyPI metapackage); fetch every
one into the cache and check its sha256 (redist) or RECORD (wheels) before anything is extracted; extract all
into a staging directory beside the destination; add the layout links and ``cudaship-toolkit.json``; then swap
the staging directory into place. A failure or interrupt at any point leaves the destination as it was.

The staging directory is ``toolkit/`` inside a work directory of this run (``.DEST.staging-<random>/``, made
by :func:`cudaship.safe_write.make_owned_dir` with a marker naming it); the previous toolkit is moved into the
same work directory before the swap, and the whole work directory is removed at the end. Leftovers of a killed
run are removed by the next install only when their marker proves them cudaship's.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudaship import __version__, safe_write, tree
from cudaship.errors import ToolkitError
from cudaship.hashing import sha256_file
from cudaship.knowledge import toolkit_data
from cudaship.loaders import load_json, read_json
from cudaship.safe_read import kind_of
from cudaship.schema import Table
from cudaship.toolkit import download, layout, pypi
from cudaship.toolkit.extract import ExtractLimits, check_member_name, extract_archive
from cudaship.toolkit.lock import InstallLock
from cudaship.toolkit.records import (
    TOOLKIT_MANIFEST,
    Artifact,
    InstalledComponent,
    Observer,
    Platform,
    Source,
    ToolkitInfo,
    VerifyProblem,
)
from cudaship.words import count

#: NVIDIA's redist base: ``<base>/redistrib_<release>.json`` and the archives below it.
NVIDIA_REDIST = "https://developer.download.nvidia.com/compute/cuda/redist"


@dataclass(frozen=True)
class InstallRequest:
    release: str  #: exact release, e.g. "13.2.2" (see toolkit_data.resolve_release)
    platform: Platform
    components: tuple[str, ...]  #: friendly names (see toolkit_data.expand_components)
    dest: Path
    source: Source = Source.REDIST
    mirror: str | None = None  #: redist base URL or directory (default: NVIDIA's)
    cache_dir: Path = field(default_factory=download.default_cache_dir)
    fetch: download.FetchOptions = field(default_factory=download.FetchOptions)
    limits: ExtractLimits = field(default_factory=ExtractLimits)
    pip: pypi.PipOptions = field(default_factory=pypi.PipOptions)


def _major(release: str) -> int:
    return int(release.split(".", 1)[0])


def _variant(entry: dict[str, Any], release: str) -> dict[str, Any] | None:
    """A platform object, looking into ``{"cuda13": {...}}`` variants where a product nests them."""
    if "relative_path" in entry:
        return entry
    nested = entry.get(f"cuda{_major(release)}")
    return nested if isinstance(nested, dict) and "relative_path" in nested else None


def parse_redist_manifest(
    data: bytes, release: str, platform: Platform, components: tuple[str, ...], base: str, label: str
) -> tuple[list[Artifact], list[str]]:
    """Artifacts for ``components`` from a ``redistrib_<release>.json``; (artifacts, notes)."""
    manifest = load_json(data, error=ToolkitError, label=label)
    if not isinstance(manifest, dict):
        raise ToolkitError(f"{label}: not a redist manifest (top level is not an object)")
    artifacts: list[Artifact] = []
    notes: list[str] = []
    for component in components:
        name = toolkit_data.source_name(component, "redist", release)
        if name is None:
            raise ToolkitError(f"component {component} has no redist archive in CUDA {release}")
        if name.included_in is not None:
            notes.append(f"{component} is part of {name.included_in} in CUDA {release}")
            continue
        assert name.name is not None
        entry = manifest.get(name.name)
        if not isinstance(entry, dict):
            raise ToolkitError(f"{label}: no component {name.name} (for {component})")
        raw_platform = entry.get(platform.value)
        target = _variant(raw_platform, release) if isinstance(raw_platform, dict) else None
        if target is None:
            have = sorted(k for k, v in entry.items() if isinstance(v, dict))
            raise ToolkitError(
                f"{label}: {name.name} has no archive for {platform.value} "
                f"(it has: {', '.join(have) or 'none'})"
            )
        fields = Table(target, f"{name.name}.{platform.value}", label, ToolkitError)
        try:
            relative = check_member_name(_valid_unicode(fields.text("relative_path")))
        except ToolkitError as e:
            raise fields.fail(fields.dotted("relative_path"), e.message) from e
        sha256 = fields.text("sha256").lower()
        try:
            size = _size_field(fields.get("size")) if "size" in fields else None
        except ValueError as e:
            raise fields.fail(fields.dotted("size"), str(e)) from e
        artifacts.append(
            Artifact(
                component=component,
                name=name.name,
                version=str(entry.get("version", "")),
                filename=relative.rsplit("/", 1)[-1],
                url=download.join_location(base, relative),
                sha256=sha256,
                size=size,
            )
        )
    return artifacts, notes


def _valid_unicode(value: str) -> str:
    """``value`` unless it holds a lone surrogate (``"\\ud800"`` is legal JSON), which no file name or URL can
    carry: ToolkitError then."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolkitError(f"{value!a} is not valid Unicode (a lone surrogate)") from None
    return value


def _size_field(value: object) -> int:
    """A manifest ``size``: a non-negative whole number of bytes (as a number or a string of digits) no
    larger than a download may be."""
    text = str(value).strip()
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise ValueError(f"must be a byte count, not {text[:40]!r}")
    size = int(text)
    if size > download.MAX_DOWNLOAD_BYTES:
        raise ValueError(f"{size} is over the {download.MAX_DOWNLOAD_BYTES} byte download limit")
    return size


def _plan_redist(
    request: InstallRequest, cache: download.Cache, observer: Observer
) -> tuple[list[Artifact], list[str]]:
    base = request.mirror or NVIDIA_REDIST
    if not download.is_url(base) and not Path(base).is_dir():
        raise ToolkitError(f"mirror {base} is neither a URL nor a directory")
    location = download.join_location(base, f"redistrib_{request.release}.json")
    observer.stage(f"reading redistrib_{request.release}.json")
    data = download.fetch_manifest(location, cache, observer=observer, options=request.fetch)
    return parse_redist_manifest(
        data, request.release, request.platform, request.components, base, f"redistrib_{request.release}.json"
    )


def _tree_hashes(root: Path) -> dict[str, str]:
    """Every file's sha256 and every link's target under ``root`` (no recursion; a FIFO or device found
    there is recorded as such, never opened)."""
    files: dict[str, str] = {}
    for directory, entries in tree.walk(root):
        for entry in entries:
            path = directory / entry.name
            rel = path.relative_to(root).as_posix()
            if rel == TOOLKIT_MANIFEST:
                continue
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                files[rel] = "link:" + os.readlink(path)
            elif stat.S_ISREG(mode):
                files[rel] = sha256_file(path)
            elif not stat.S_ISDIR(mode):
                files[rel] = f"special:{kind_of(mode)}"
    return files


def _staging_prefix(dest: Path) -> str:
    return f".{dest.name}.staging-"


def _clean_leftovers(dest: Path) -> None:
    """Work directories that a killed run left beside ``dest`` (we hold the lock, so none is live): only
    those whose marker proves them cudaship's (:func:`safe_write.owns`). A user's directory whose name merely
    begins the same way (``.DEST.staging-notes``, ``.DEST.old-backup-2025``) is never touched."""
    prefixes = (_staging_prefix(dest), f".{dest.name}.old-")
    try:
        names = [name for name in os.listdir(dest.parent) if name.startswith(prefixes)]
    except OSError:
        return
    for name in names:
        safe_write.remove_owned(dest.parent / name)


def _check_destination(dest: Path) -> None:
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise ToolkitError("exists and is not a directory", path=str(dest))
    if dest.is_dir() and any(dest.iterdir()) and not (dest / TOOLKIT_MANIFEST).is_file():
        raise ToolkitError(
            f"exists, is not empty and has no {TOOLKIT_MANIFEST}: not replacing it", path=str(dest)
        )


def _swap_in(staging: Path, dest: Path, work: Path) -> None:
    """Rename ``staging`` (inside ``work``, this run's own directory) to ``dest``; a toolkit already at
    ``dest`` is first moved into ``work`` (one rename each way), and put back if the swap fails."""
    if dest.exists():
        old = work / "previous"
        os.replace(dest, old)
        try:
            os.replace(staging, dest)
        except OSError:
            os.replace(old, dest)
            raise
    else:
        os.replace(staging, dest)


def _check_provides(staging: Path, request: InstallRequest, artifacts: list[Artifact]) -> None:
    """Every installed component holds the paths it promises (``bin/nvcc`` for nvcc): a package that lacks
    them is refused before the toolkit is moved into place, never installed with exit 0."""
    for artifact in artifacts:
        for rel in toolkit_data.component_provides(artifact.component, request.platform.is_windows):
            if not (staging / rel).is_file():
                hint = (
                    "use --source redist (NVIDIA's archives, or --mirror URL|DIR)"
                    if request.source is Source.PYPI
                    else "the archive is not what the manifest names"
                )
                raise ToolkitError(
                    f"component {artifact.component}: {artifact.filename} holds no {rel}, so the toolkit "
                    f"would not work; {hint}"
                )


def _unreachable(e: download.DownloadFailed, request: InstallRequest) -> ToolkitError:
    """A download that failed for want of a server (retries or the deadline spent), with the other ways to
    get the toolkit named: pip's index (``--source pypi``) or a copy of the redist tree (``--mirror``)."""
    where = "NVIDIA's server" if request.mirror is None else "the mirror"
    return ToolkitError(
        f"{e.message}; {where} cannot be reached from here: --source pypi fetches NVIDIA's wheels through "
        "pip's index, --mirror URL|DIR reads a copy of the redist tree"
    )


def install(request: InstallRequest, observer: Observer | None = None) -> ToolkitInfo:
    """Assemble the toolkit that ``request`` describes at ``request.dest``; returns what it recorded."""
    try:
        return _install(request, observer)
    except download.DownloadFailed as e:
        raise _unreachable(e, request) from None


def _install(request: InstallRequest, observer: Observer | None = None) -> ToolkitInfo:
    observer = observer or Observer()
    dest = request.dest.absolute()
    cache = download.Cache(request.cache_dir)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with InstallLock(dest):
        _check_destination(dest)
        _clean_leftovers(dest)
        if request.source is Source.REDIST:
            artifacts, notes = _plan_redist(request, cache, observer)
        else:
            pip_options = request.pip
            if request.fetch.offline and not pip_options.offline:
                pip_options = pypi.PipOptions(
                    pip_options.python, True, pip_options.extra_args, pip_options.timeout
                )
            artifacts, notes = pypi.plan(
                request.release, request.platform, request.components, cache.pypi_dir(), pip_options, observer
            )
        for note in notes:
            observer.stage(note)
        local: list[tuple[Artifact, Path]] = []
        for artifact in artifacts:  # everything fetched and verified before anything is extracted
            if request.source is Source.REDIST:
                path = download.fetch(
                    artifact.url,
                    artifact.sha256,
                    artifact.filename,
                    cache,
                    size=artifact.size,
                    observer=observer,
                    options=request.fetch,
                )
            else:
                path = Path(artifact.url)
                observer.stage(f"checking RECORD of {artifact.filename}")
                pypi.verify_record(path)
            local.append((artifact, path))
        # this run's own work directory (marker inside: a later run can prove it is cudaship's); the toolkit
        # is assembled in its "toolkit" folder, which becomes --dest by one rename
        work = safe_write.make_owned_dir(dest.parent, _staging_prefix(dest), error=ToolkitError)
        staging = work.path / "toolkit"
        try:
            staging.mkdir(mode=0o700)
            owners: dict[str, str] = {}
            major = _major(request.release)
            redist = request.source is Source.REDIST
            remap_for = layout.redist_remap if redist else layout.pypi_remap
            for artifact, path in local:
                observer.stage(f"extracting {artifact.filename}")
                result = extract_archive(
                    path,
                    staging,
                    filename=artifact.filename,
                    strip_top=redist,  # a redist archive nests all under one top folder; a wheel does not
                    remap=remap_for(request.platform, major, artifact.component),
                    limits=request.limits,
                )
                clashes = [
                    p
                    for p in (*result.files, *result.links)
                    if owners.get(p, artifact.component) != artifact.component
                ]
                if clashes:
                    observer.warning(
                        f"{artifact.filename} replaced {count(len(clashes), 'file')} of "
                        f"{owners[clashes[0]]}, e.g. {clashes[0]}"
                    )
                for p in (*result.files, *result.links):
                    owners[p] = artifact.component
            layout.finish(staging, request.platform)
            _check_provides(staging, request, [a for a, _ in local])
            info = ToolkitInfo(
                release=request.release,
                platform=request.platform,
                source=request.source,
                components=tuple(
                    InstalledComponent(
                        a.component,
                        a.name,
                        a.version,
                        request.source,
                        a.filename,
                        a.sha256,
                        a.url if request.source is Source.REDIST else a.filename,
                    )
                    for a, _ in local
                ),
                files=_tree_hashes(staging),
                created=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
                cudaship_version=__version__,
            )
            safe_write.replace_bytes(  # never through a link an archive put at that name
                staging / TOOLKIT_MANIFEST,
                (json.dumps(info.to_json(), indent=2) + "\n").encode("utf-8"),
                mode=0o644,
                error=ToolkitError,
            )
            staging.chmod(0o755)
            observer.stage(f"moving the toolkit into {dest}")
            _swap_in(staging, dest, work.path)
        finally:
            work.remove()
    return info


def read_toolkit(root: Path) -> ToolkitInfo:
    """The ``cudaship-toolkit.json`` of the toolkit at ``root``."""
    manifest = root / TOOLKIT_MANIFEST
    if not manifest.exists() and not manifest.is_symlink():
        raise ToolkitError(f"not a cudaship toolkit (no {TOOLKIT_MANIFEST})", path=str(root))
    try:
        data = read_json(manifest, error=ToolkitError)
        return ToolkitInfo.from_json(data)
    except ToolkitError as e:
        raise ToolkitError(f"{TOOLKIT_MANIFEST} is invalid: {e.message}", path=str(root)) from None


def verify(root: Path) -> tuple[ToolkitInfo, list[VerifyProblem]]:
    """Compare the files at ``root`` with what ``cudaship-toolkit.json`` recorded."""
    info = read_toolkit(root)
    actual = _tree_hashes(root)
    problems: list[VerifyProblem] = []
    for path, recorded in sorted(info.files.items()):
        now = actual.pop(path, None)
        if now is None:
            problems.append(VerifyProblem(path, "missing"))
        elif now != recorded:
            problems.append(
                VerifyProblem(path, "link changed" if recorded.startswith("link:") else "modified")
            )
    problems.extend(VerifyProblem(path, "unexpected") for path in sorted(actual))
    return info, problems


def remove(root: Path) -> ToolkitInfo:
    """Delete the toolkit at ``root`` (only a directory with a cudaship-toolkit.json), under the lock."""
    root = root.absolute()
    with InstallLock(root):
        info = read_toolkit(root)
        doomed = safe_write.make_owned_dir(root.parent, f".{root.name}.old-", error=ToolkitError)
        # one rename: the toolkit is gone at once, even if the delete is slow (or killed: the next install
        # beside it removes the rest, proven its own by the marker)
        os.replace(root, doomed.path / "toolkit")
        doomed.remove()
    return info
