"""Where distributions come from, besides the index: an installed environment, a wheelhouse, the
knowledge table. Each source answers :meth:`find` (newest fitting distribution or None).

What these sources read is input like the audited wheel: METADATA and RECORD of an environment are opened
through :mod:`cudaship.safe_read` (a FIFO, a device or a link to ``/dev/zero`` is refused, never read; each
file has the size cap of its kind in :mod:`cudaship.wheel.metadata`), a wheelhouse's wheels through the
archive layer (:class:`cudaship.wheel.archive.WheelArchive`: encrypted members, bombs and overlaps refused). A
distribution that cannot be read is left out with a line in :attr:`problems` naming it (the closure turns
each into a note); it never ends the audit."""

from __future__ import annotations

import json
import posixpath
import subprocess
from pathlib import Path
from typing import Protocol

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaship.errors import CudashipError, UsageError, WheelError
from cudaship.knowledge import providers as known
from cudaship.providers.distinfo import distribution, from_wheel_names, read_metadata
from cudaship.providers.records import Distribution, Target
from cudaship.providers.select import Candidate, best, wheel_version
from cudaship.safe_read import read_regular
from cudaship.wheel.archive import WheelArchive
from cudaship.wheel.metadata import MAX_METADATA_BYTES, MAX_RECORD_BYTES, find_dist_info, record_paths


class UnreadableDistribution(CudashipError):
    """A source's file for one distribution cannot be read (a wheel that is no zip, an encrypted or bomb
    member, METADATA over its cap): that distribution is not found; the source still answers for others."""


class Source(Protocol):
    @property
    def label(self) -> str: ...

    def find(self, name: str, spec: SpecifierSet, target: Target) -> Distribution | None: ...


# --- an installed environment -------------------------------------------------------------------------------


def _venv_version(root: Path) -> str | None:
    """``3.12`` from a virtual environment's ``pyvenv.cfg`` (``version`` or ``version_info``), else None."""
    cfg = root / "pyvenv.cfg"
    if not cfg.exists() and not cfg.is_symlink():
        return None
    # input like METADATA and RECORD: a FIFO or device named so is refused (one line), never read
    text = read_regular(cfg, 65536, error=UsageError, what="pyvenv.cfg").decode("utf-8", errors="replace")
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() in ("version", "version_info"):
            parts = value.strip().split(".")
            if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                return f"{parts[0]}.{parts[1]}"
    return None


def prefix_site_packages(root: Path) -> list[Path]:
    """The site-packages directories of an environment root (a virtual environment or an installation
    prefix), read from its layout without running anything: POSIX ``lib/pythonX.Y/site-packages`` and
    ``lib64/...`` (purelib and platlib; the version from ``pyvenv.cfg`` when it names one, else every
    ``python3*`` found), free-threaded ``pythonX.Yt``, Debian's ``dist-packages``, and Windows
    ``Lib/site-packages``. Empty when
    ``root`` has none of them."""
    version = _venv_version(root)
    found: list[Path] = []
    for lib in ("lib", "lib64"):
        base = root / lib
        if not base.is_dir():
            continue
        names = [f"python{version}", f"python{version}t"] if version else []
        if not names or not any((base / n / "site-packages").is_dir() for n in names):
            names = sorted(d.name for d in base.glob("python3*") if d.is_dir())
        for name in names:  # dist-packages: Debian's system prefix
            found.extend(
                base / name / s for s in ("site-packages", "dist-packages") if (base / name / s).is_dir()
            )
    for name in ("Lib", "lib"):
        windows = root / name / "site-packages"
        if windows.is_dir():
            found.append(windows)
    out: list[Path] = []
    for d in found:
        if d.resolve() not in {o.resolve() for o in out}:
            out.append(d)
    return out


#: Where ``venv`` puts an environment's interpreter: ``bin/`` on POSIX, ``Scripts/`` on Windows.
VENV_INTERPRETERS = ("bin/python", "bin/python3", "Scripts/python.exe")


def venv_interpreter(directory: Path) -> Path | None:
    """The interpreter of the virtual environment holding ``directory``: its root (``directory`` itself or
    the nearest parent with a ``pyvenv.cfg``) or a directory inside it (its site-packages); None when no
    virtual environment holds it or its root has no interpreter."""
    resolved = directory.resolve()
    for parent in (resolved, *resolved.parents):
        if (parent / "pyvenv.cfg").is_file():
            return next((parent / n for n in VENV_INTERPRETERS if (parent / n).exists()), None)
    return None


def site_packages(env: str) -> list[Path]:
    """The site-packages directories of ``env``: an environment root (a virtual environment, with its
    ``pyvenv.cfg``, or an installation prefix: :func:`prefix_site_packages`) gives its own; another
    directory is taken as one site-packages; a file is a Python interpreter, asked for its purelib and
    platlib."""
    path = Path(env)
    if path.is_dir():
        return prefix_site_packages(path) or [path]
    if not path.exists():
        raise UsageError("no such file or directory", path=env)
    code = (
        "import json, sysconfig; "
        "print(json.dumps([sysconfig.get_path('purelib'), sysconfig.get_path('platlib')]))"
    )
    try:
        done = subprocess.run([env, "-c", code], capture_output=True, text=True, timeout=60, check=True)
        dirs = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        raise UsageError(f"not a Python interpreter that answers: {e}", path=env) from None
    return list(dict.fromkeys(Path(d) for d in dirs if d))


def no_distributions(env: str, dirs: list[Path], problems: list[str] | None = None) -> UsageError:
    """The one-line error for an environment holding no installed distribution (no ``*.dist-info`` with a
    readable METADATA and RECORD): reading nothing must not pass. Where some ``.dist-info`` were there but
    none could be read, the first problem is named (and how many more there were)."""
    where = ", ".join(str(d) for d in dirs) or env
    looked = f" (looked in {where})" if where != env else ""
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return UsageError(
            f"no readable installed distribution{looked}: {problems[0]}{more}",
            path=env,
        )
    return UsageError(
        "no installed distribution (*.dist-info) found: give a Python interpreter, a virtual environment or "
        f"prefix, or a site-packages directory{looked}",
        path=env,
    )


class EnvSource:
    """Installed distributions: METADATA and RECORD of each ``*.dist-info`` in the site-packages given."""

    def __init__(self, env: str, *, allow_empty: bool = False) -> None:
        self.env = env
        self.dirs = site_packages(env)
        self._dists: dict[str, Distribution] = {}
        #: one line per ``.dist-info`` that could not be read (and was left out)
        self.problems: list[str] = []
        for d in self.dirs:
            for info in sorted(d.glob("*.dist-info")):
                dist = self._read(d, info)
                if dist is not None:
                    self._dists.setdefault(dist.name, dist)
        if not self._dists and not allow_empty:
            raise no_distributions(env, self.dirs, self.problems)

    @property
    def label(self) -> str:
        return f"env {self.env}"

    def distributions(self) -> tuple[Distribution, ...]:
        """Every distribution found, in name order (the first site-packages directory holding a name wins)."""
        return tuple(self._dists[name] for name in sorted(self._dists))

    def _read(self, root: Path, info: Path) -> Distribution | None:
        try:
            return self._read_dist_info(info)
        except CudashipError as e:
            self.problems.append(f"{e}; left out")
            return None

    def _read_dist_info(self, info: Path) -> Distribution | None:
        metadata_path, record_path = info / "METADATA", info / "RECORD"
        if not metadata_path.exists() and not metadata_path.is_symlink():
            return None  # not a distribution (an empty directory left by an uninstall)
        metadata = read_regular(metadata_path, MAX_METADATA_BYTES, error=WheelError, what="METADATA")
        try:
            meta = read_metadata(metadata)
        except CudashipError as e:
            raise e.with_path(str(metadata_path)) from None
        if not record_path.exists() and not record_path.is_symlink():
            return (
                None  # no file list (some distributions' packagers drop RECORD): nothing to resolve from it
            )
        record = read_regular(record_path, MAX_RECORD_BYTES, error=WheelError, what="RECORD")
        files = []
        for path in record_paths(record, str(record_path)):
            # RECORD paths are relative to site-packages, ``/``-separated; normalised lexically (a stat per
            # file costs seconds on torch's 12,000 files): ``../../bin/x`` lies outside (scripts, headers)
            rel = posixpath.normpath(path.replace("\\", "/"))
            if rel.startswith(("/", "../")) or rel == ".." or (len(rel) > 1 and rel[1] == ":"):
                continue
            files.append(rel)
        return distribution(meta, files, f"env {info}")

    def find(self, name: str, spec: SpecifierSet, target: Target) -> Distribution | None:
        dist = self._dists.get(canonicalize_name(name))
        if dist is None:
            return None
        try:
            if not spec.contains(Version(dist.version), prereleases=True):
                return None
        except InvalidVersion:
            return None
        return dist


# --- a wheelhouse ---------------------------------------------------------------------------------------


class WheelhouseSource:
    """Wheels in a directory (``--find-links DIR``): the newest fitting one per project, read locally."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        path = Path(directory)
        if not path.is_dir():
            raise UsageError("not a directory", path=directory)
        self._by_name: dict[str, list[Candidate]] = {}
        for f in sorted(path.glob("*.whl")):
            version = wheel_version(f.name)
            if version is None:
                continue
            project = canonicalize_name(f.name.split("-", 1)[0])
            self._by_name.setdefault(project, []).append(Candidate(f.name, version, str(f)))

    @property
    def label(self) -> str:
        return f"wheelhouse {self.directory}"

    def find(self, name: str, spec: SpecifierSet, target: Target) -> Distribution | None:
        chosen = best(self._by_name.get(canonicalize_name(name), ()), spec, target)
        if chosen is None:
            return None
        try:  # the archive layer: a FIFO, an encrypted member, a bomb or an overlap is refused, never read
            with WheelArchive(chosen.location) as wheel:
                names = [m.name for m in wheel.members()]
                directory = find_dist_info(names, chosen.filename)
                metadata = wheel.data_member(f"{directory}/METADATA", MAX_METADATA_BYTES)
                if metadata is None:
                    raise WheelError(f"{directory}/METADATA is missing")
                return from_wheel_names(names, chosen.filename, f"wheelhouse {chosen.location}", metadata)
        except CudashipError as e:
            message = str(e) if e.path else f"{chosen.location}: {e}"
            raise UnreadableDistribution(f"{self.label}: {message}; left out") from None


# --- the knowledge table (offline only) ---------------------------------------------------------------------


class KnowledgeSource:
    """What NVIDIA's and a few major packages ship, from ``knowledge/data/providers.toml`` and
    ``nvidia_libraries.toml``; consulted only offline or when the index cannot be reached."""

    label = "knowledge table (offline)"

    def find(self, name: str, spec: SpecifierSet, target: Target) -> Distribution | None:
        row = known.known_distribution(canonicalize_name(name), spec, target.os)
        if row is None:
            return None
        return Distribution(
            row.name, row.version, row.requires_dist, row.files, f"knowledge ({row.source})", row.extras
        )
