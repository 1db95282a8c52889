"""Where the oracle loads a wheel: a fresh virtual environment with the wheel installed by pip, or an existing
interpreter with the wheel layered on it.

Fresh (the default): ``python -m venv`` in a temporary directory (removed afterwards unless ``keep``), then
``pip install WHEEL HOST...`` (the interpreter's own pip with ``--python VENV`` when it has pip 22.3+, so the
venv is made without pip; else the venv's pip): pip resolves the wheel's declared requirements as a user's
``pip install`` would, plus the undeclared host packages the static audit names
(``WheelAudit.host_packages``), each pinned by a ``--with`` specifier of the same name when given.
``--index-url``, ``--find-links`` and ``--offline`` (pip's ``--no-index``) are passed to pip, and
``--only-binary :all:``: pip installs wheels only, so no requirement's build backend runs (``--allow-sdist``
lets pip build sdists: their ``setup.py`` or backend then runs). pip's own failure (no version satisfies a
requirement) is a result: :attr:`LoadEnvironment.failure` holds pip's ERROR lines.

Every process here runs inside the run's :class:`~cudaship.containment.Containment`: the allow-listed
environment (pip keeps its own ``PIP_*`` settings, never credentials; its cache is the caller's pip cache,
except with ``--allow-sdist``), a fresh ``$HOME`` and ``TMPDIR``, the memory limit and the run's deadline.

Existing (``--load-python PYTHON``): nothing is installed into that environment. The wheel alone is
installed with ``pip install --no-deps --target`` into a temporary directory that the children find first
on PYTHONPATH: the question is whether the wheel loads with what that environment already has. What a real
install of the wheel makes through an install-time convention it follows is made there too
(:func:`make_install_links`: wheel-axle-runtime's ``symlinks.txt`` links, which its ``.pth`` makes at the
first start after ``pip install``, and which a ``--target`` directory never gets).

The interpreter of a fresh venv must be one the wheel installs on: the first of this process's interpreter
and ``pythonX.Y`` on PATH (for each ``cpXY`` the wheel's tags name) whose tags the wheel's match
(:func:`choose_interpreter`); when none does, the loader check is skipped with that reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags, parse_tag
from packaging.utils import canonicalize_name

from cudaship.containment import Containment, DeadlinePassed
from cudaship.errors import OracleError, WheelError
from cudaship.knowledge.install_conventions import link_convention
from cudaship.wheel.archive import WheelArchive
from cudaship.wheel.metadata import SYMLINKS_FILE
from cudaship.words import count

#: Seconds pip may take (a large wheel with CUDA requirements from a cold cache downloads gigabytes).
PIP_TIMEOUT = 1800
_ERROR_LINES = 8


@dataclass(frozen=True)
class InstallOptions:
    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    offline: bool = False
    pins: tuple[str, ...] = ()  #: ``--with`` requirement specifiers (``torch==2.9.1``)
    extras: tuple[str, ...] = ()  #: ``--extra``: the wheel's extras to install with it (``WHEEL[ctk]``)
    python: str | None = None  #: ``--load-python``: an existing environment's interpreter
    keep: bool = False
    pip_timeout: float = PIP_TIMEOUT
    allow_sdist: bool = False  #: ``--allow-sdist``: let pip build a requirement that has no wheel


@dataclass(frozen=True)
class LoadEnvironment:
    """The environment the children run in."""

    python: str  #: the interpreter the children run
    sites: tuple[str, ...]  #: directories the wheel's files are installed under, first searched first
    fresh: bool  #: a venv made for this run (else an existing interpreter)
    installed: tuple[str, ...] = ()  #: what was asked of pip (the wheel, host packages)
    directory: str | None = None  #: the temporary directory (kept with ``keep``)
    pythonpath: str | None = None  #: the ``--target`` directory layered on an existing environment
    failure: str | None = None  #: pip's failure, one paragraph; then nothing can be loaded
    notes: tuple[str, ...] = field(default=())


def python_version(python: str, run: Containment | None = None) -> tuple[int, int]:
    done = _run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], 60, run)
    if done.returncode != 0:
        raise OracleError(f"cannot run: {_last_lines(done.stderr, 1) or done.returncode}", path=python)
    major, minor = done.stdout.strip().split(".")
    return int(major), int(minor)


#: pip's lines that say what it does now, and how a progress line shows each: ``Collecting torch>=2``
_PIP_STEPS = (
    "Collecting ",
    "Downloading ",
    "Processing ",
    "Using cached ",
    "Building wheel",
    "Installing collected packages: ",
    "Successfully installed ",
)


def pip_step(text: str) -> str | None:
    """What one line of pip's output says it does now (``Collecting torch==2.9.1``, ``Downloading
    torch-2.9.1-...whl (899.7 MB)``, ``Installing 31 packages``), or None for a line that says no step."""
    text = text.strip()
    for start in _PIP_STEPS:
        if text.startswith(start):
            if start == "Installing collected packages: ":
                names = [n for n in text[len(start) :].split(", ") if n]
                return f"installing {len(names):,} package{'' if len(names) == 1 else 's'}"
            if start == "Successfully installed ":
                return "installed"
            if start in ("Downloading ", "Processing ", "Using cached "):  # a URL or a path: its file name
                where, _, rest = text[len(start) :].partition(" ")
                text = start + where.replace("\\", "/").rsplit("/", 1)[-1] + (f" {rest}" if rest else "")
            return text[0].lower() + text[1:]
    return None


def _run(
    args: Sequence[str],
    timeout: float,
    run: Containment | None = None,
    *,
    pip: str | None = None,
    on_step: Callable[[str], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``args`` run inside ``run`` (a containment of its own when None: removed at once). ``pip``: pip's
    cache directory, given when ``args`` runs pip (then pip's own variables are kept). ``on_step``: called
    with each step pip says it takes (:func:`pip_step`) while it runs."""
    if run is None:
        with Containment() as own:
            return _run(args, timeout, own, pip=pip, on_step=on_step)
    env = run.environment(pip=pip is not None)
    if pip is not None:
        env["PIP_CACHE_DIR"] = pip

    def said(text: str) -> None:
        step = pip_step(text)
        if step is not None and on_step is not None:
            on_step(step)

    try:
        return run.run_text(args, timeout=timeout, env=env, on_line=said if on_step is not None else None)
    except FileNotFoundError:
        raise OracleError("no such interpreter or program", path=str(args[0])) from None
    except subprocess.TimeoutExpired as e:
        raise OracleError(f"{Path(args[0]).name} did not finish within {e.timeout:g} s") from None
    except DeadlinePassed as e:
        raise OracleError(str(e)) from None


def user_pip_cache(environ: dict[str, str] | None = None) -> str:
    """The caller's pip cache directory (``PIP_CACHE_DIR``, else pip's default for this OS)."""
    env = dict(os.environ if environ is None else environ)
    if env.get("PIP_CACHE_DIR"):
        return env["PIP_CACHE_DIR"]
    home = Path(env.get("HOME") or Path.home())
    if sys.platform == "win32":
        return str(Path(env.get("LOCALAPPDATA") or home / "AppData" / "Local") / "pip" / "Cache")
    if sys.platform == "darwin":
        return str(home / "Library" / "Caches" / "pip")
    return str(Path(env.get("XDG_CACHE_HOME") or home / ".cache") / "pip")


def pip_cache(run: Containment, options: InstallOptions) -> str:
    """pip's cache for this run: the caller's (pip, not the package, writes it: installing wheels runs no
    package code), or the run's own under its home with ``--allow-sdist`` (a build backend runs with pip's
    environment and could write there)."""
    if options.allow_sdist:
        return str(run.home / ".cache" / "pip")
    return user_pip_cache()


def _last_lines(text: str, n: int) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def supported(wheel_tags: Sequence[str], version: tuple[int, int]) -> bool:
    """Whether a wheel with ``wheel_tags`` installs on CPython ``version`` on this machine (its platforms)."""
    ours: set[Tag] = set(cpython_tags(version)) | set(compatible_tags(version))
    for text in wheel_tags:
        try:
            if any(t in ours for t in parse_tag(text)):
                return True
        except ValueError:
            continue
    return False


def _candidates(wheel_tags: Sequence[str]) -> list[str]:
    """This process's interpreter, then for each ``cpXY`` of the tags ``pythonX.Y`` on PATH and in pyenv's
    versions directory (``$PYENV_ROOT``, default ``~/.pyenv``: a PATH shim there runs only the selected
    version)."""
    seen: list[str] = [sys.executable]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for text in wheel_tags:
        py = text.split("-", 1)[0]
        for part in py.split("."):
            if part.startswith("cp") and part[2:].isdigit() and len(part) >= 4:
                name = f"python{part[2]}.{part[3:]}"
                found = [shutil.which(name)]
                found += [
                    str(p) for p in sorted(pyenv.glob(f"{part[2]}.{part[3:]}.*/bin/{name}"), reverse=True)
                ]
                seen.extend(f for f in found if f and f not in seen)
    return seen


def choose_interpreter(wheel_tags: Sequence[str], run: Containment | None = None) -> tuple[str | None, str]:
    """The first interpreter here the wheel installs on, or None and the one-line reason."""
    tried: list[str] = []
    for python in _candidates(wheel_tags):
        try:
            version = python_version(python, run)
        except OracleError:
            continue
        if supported(wheel_tags, version):
            return python, f"Python {version[0]}.{version[1]} ({python})"
        if f"{version[0]}.{version[1]}" not in tried:
            tried.append(f"{version[0]}.{version[1]}")
    tags = ", ".join(sorted(wheel_tags)[:4]) + (" ..." if len(wheel_tags) > 4 else "")
    return None, (
        f"no interpreter here matches the wheel's tags ({tags}); tried Python {', '.join(tried) or 'none'}"
    )


def host_requirements(host_packages: Sequence[str], pins: Sequence[str]) -> tuple[str, ...]:
    """The host packages to install, each replaced by the ``--with`` specifier of the same name, then the
    other ``--with`` specifiers."""
    pinned: dict[str, str] = {}
    for text in pins:
        try:
            pinned[canonicalize_name(Requirement(text).name)] = text
        except InvalidRequirement as e:
            raise OracleError(f"--with {text!r}: not a requirement ({e})") from None
    out = [pinned.pop(canonicalize_name(name), name) for name in host_packages]
    return (*out, *pinned.values())


def _pip_args(options: InstallOptions) -> list[str]:
    args = ["--disable-pip-version-check", "--no-input"]
    if not options.allow_sdist:
        args += ["--only-binary", ":all:"]
    if options.offline:
        args.append("--no-index")
    elif options.index_url:
        args += ["--index-url", options.index_url]
    for d in options.find_links:
        args += ["--find-links", d]
    return args


def _pip_failure(done: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (done.stderr + "\n" + done.stdout).splitlines()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    chosen = errors[:_ERROR_LINES] or [ln for ln in lines if ln][-_ERROR_LINES:]
    return f"pip install failed (exit {done.returncode}): " + " / ".join(chosen)


def _sites(python: str, run: Containment | None = None) -> tuple[str, ...]:
    code = "import json,sysconfig;p=sysconfig.get_paths();print(json.dumps([p['purelib'],p['platlib']]))"
    done = _run([python, "-I", "-c", code], 60, run)
    if done.returncode != 0:
        raise OracleError(f"cannot read its site-packages: {_last_lines(done.stderr, 1)}", path=python)
    paths: list[str] = []
    for p in json.loads(done.stdout):
        if p not in paths:
            paths.append(str(p))
    return tuple(paths)


def has_pip_python_option(python: str, run: Containment | None = None, cache: str = "") -> bool:
    """Whether ``python`` has a pip that can install into another interpreter (``pip --python``, pip 22.3+):
    then the venv is made without pip (ensurepip costs seconds) and this pip installs into it."""
    done = _run([python, "-m", "pip", "--version"], 60, run, pip=cache or user_pip_cache())
    if done.returncode != 0:
        return False
    words = done.stdout.split()
    try:
        major, minor = (int(x) for x in words[1].split(".")[:2])
    except (IndexError, ValueError):
        return False
    return (major, minor) >= (22, 3)


def _bin(venv: Path) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / ("python.exe" if os.name == "nt" else "python")


def prepare(
    wheel: str,
    wheel_tags: Sequence[str],
    host_packages: Sequence[str],
    options: InstallOptions,
    run: Containment,
    on_step: Callable[[str], None] | None = None,
) -> LoadEnvironment | str:
    """The environment to load ``wheel`` in, under ``run``'s directory, or the one-line reason the loader
    check is skipped (no interpreter here takes the wheel). pip's failure is a :class:`LoadEnvironment` with
    ``failure``. ``on_step``: called with each step pip says it takes while it installs (:func:`pip_step`)."""
    base = run.directory("env")
    cache = pip_cache(run, options)
    pip = _pip_args(options)
    wheel_abs = str(Path(wheel).resolve())
    if options.extras:
        wheel_abs += "[" + ",".join(options.extras) + "]"
    if options.python is not None:
        python: str | None = options.python
        assert python is not None
        version = python_version(python, run)
        if not supported(wheel_tags, version):
            return f"the wheel's tags do not match {python} (Python {version[0]}.{version[1]})"
        target = base / "target"
        args = [python, "-m", "pip", "install", *pip, "--no-deps", "--target", str(target), wheel_abs]
        done = _run(args, options.pip_timeout, run, pip=cache, on_step=on_step)
        made = make_install_links(wheel, target) if done.returncode == 0 else None
        sites = _sites(python, run)
        merged = link_environment(target, sites) if done.returncode == 0 else None
        env = LoadEnvironment(
            python=python,
            sites=(str(target), *sites),
            fresh=False,
            installed=(wheel_abs,),
            directory=str(base),
            pythonpath=str(target),
            notes=(
                f"the wheel alone (--no-deps) layered on {python}'s environment",
                *([made] if made else []),
                *([merged] if merged else []),
            ),
        )
        return env if done.returncode == 0 else _failed(env, done)
    python, why = choose_interpreter(wheel_tags, run)
    if python is None:
        return why
    venv = base / "venv"
    outer_pip = has_pip_python_option(python, run, cache)
    venv_args = [python, "-m", "venv", *(["--without-pip"] if outer_pip else []), str(venv)]
    done = _run(venv_args, options.pip_timeout, run, pip=cache)
    if done.returncode != 0:
        raise OracleError(f"cannot create a virtual environment: {_last_lines(done.stderr, 2)}", path=python)
    vpython = str(_bin(venv))
    hosts = host_requirements(host_packages, options.pins)
    installer = [python, "-m", "pip", "--python", vpython] if outer_pip else [vpython, "-m", "pip"]
    args = [*installer, "install", *pip, wheel_abs, *hosts]
    done = _run(args, options.pip_timeout, run, pip=cache, on_step=on_step)
    env = LoadEnvironment(
        python=vpython,
        sites=_sites(vpython, run),
        fresh=True,
        installed=(wheel_abs, *hosts),
        directory=str(base),
        notes=(f"a fresh venv of {why}" + (f", with {', '.join(hosts)}" if hosts else ""),),
    )
    return env if done.returncode == 0 else _failed(env, done)


def _within(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def make_install_links(wheel: str, site: Path) -> str | None:
    """Make in ``site`` (a ``pip install --target`` directory) the links the wheel's install-time convention
    makes after a real ``pip install`` (wheel-axle-runtime's ``.dist-info/symlinks.txt``, read by the one
    reader, :meth:`~cudaship.wheel.archive.WheelArchive.read_dist_info`; the convention and its source:
    knowledge/data/install_conventions.toml). pip ``--target`` puts the runtime's ``.pth`` where Python never
    processes it, so without this the layer lacks files every user's install has. As the runtime does: in file
    order (a link made earlier counts for a later one's target), an existing file or link at the place
    replaced, a link or target that leaves ``site`` refused (left out). Returns the note saying what was
    made, or None when the wheel lists no link."""
    with WheelArchive(wheel) as archive:
        try:
            dist = archive.read_dist_info()
        except WheelError:  # the static audit has said what is wrong with it
            return None
    if not dist.links:
        return None
    root = os.path.realpath(site)
    made = refused = 0
    for link in dist.links:
        spot = link.place(dist.directory)
        if spot is None:
            refused += 1
            continue
        path = os.path.join(site, *spot[0].split("/"))
        parent = os.path.dirname(path)
        aim = os.path.realpath(os.path.join(parent, *link.target.split("/")))
        if not (_within(root, os.path.realpath(parent)) and _within(root, aim)):
            refused += 1
            continue
        try:
            os.makedirs(parent, exist_ok=True)
            if os.path.islink(path) or os.path.isfile(path):
                os.unlink(path)
            os.symlink(link.target, path, target_is_directory=link.directory)
            made += 1
        except OSError:
            refused += 1
    convention = link_convention(SYMLINKS_FILE)
    runtime = convention.runtime if convention is not None else "its runtime"
    links = count(len(dist.links), "link")
    return (
        f"{made} of {links} of {dist.directory}/{SYMLINKS_FILE} made in the layer, as "
        f"{runtime} makes them at the first start after a pip install (pip --target does not run it; "
        "knowledge/data/install_conventions.toml)"
        + (f"; {refused} left out (outside the install directory)" if refused else "")
    )


#: how deep :func:`link_environment` merges a directory both the layer and the environment hold (``nvidia/``
#: then ``nvidia/cu13/``): namespace packages nest two or three levels
_MERGE_DEPTH = 3
#: entries of a site directory never linked into the layer: metadata (the environment's distributions stay
#: known once, from their own site directory), ``.pth`` files and caches
_NOT_LINKED = (".dist-info", ".egg-info", ".egg-link", ".pth", "__pycache__")


def link_environment(layer: Path, sites: Sequence[str]) -> str | None:
    """Make the environment's site directories reachable from the layer, as one site-packages is after a real
    ``pip install``. A wheel's library finds another distribution's by a RUNPATH relative to itself
    (``$ORIGIN/../nvidia/cublas/lib``, ``$ORIGIN/../../cuquantum/lib``), which from the ``--target`` layer
    names a directory of the layer, not of the environment. Before this, such a library did not load in the
    layer (libcublas.so.12: cannot open shared object file) while it does for every user.

    Each directory of a site directory that the layer lacks gets a link in the layer. A directory both hold is
    merged one level down when the layer's is no regular package (no ``__init__.py``: a namespace such as
    ``nvidia/`` that several distributions share); a regular package of the wheel keeps only its own files.
    Only links are made, inside the layer: the environment is not written, and removing the layer
    (``shutil.rmtree``, which unlinks a link and never follows it) leaves it whole. Returns the note, or None
    when nothing was linked."""
    linked: list[str] = []

    def merge(here: Path, site: str, depth: int, prefix: str) -> None:
        try:
            entries = sorted(os.scandir(site), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if entry.name.endswith(_NOT_LINKED) or not entry.is_dir():
                continue
            spot = here / entry.name
            if not os.path.lexists(spot):
                try:
                    os.symlink(entry.path, spot, target_is_directory=True)
                except OSError:
                    continue
                linked.append(prefix + entry.name)
            elif (
                depth < _MERGE_DEPTH
                and spot.is_dir()
                and not spot.is_symlink()
                and not (spot / "__init__.py").exists()
            ):
                merge(spot, entry.path, depth + 1, f"{prefix}{entry.name}/")

    layer_real = os.path.realpath(layer)
    for site in sites:
        if os.path.isdir(site) and os.path.realpath(site) != layer_real:
            merge(layer, site, 1, "")
    if not linked:
        return None
    shown = ", ".join(linked[:3]) + (", ..." if len(linked) > 3 else "")
    return (
        f"{count(len(linked), 'directory', 'directories')} of the environment linked into the layer "
        f"({shown}), so a RUNPATH that leaves the wheel's own directory ($ORIGIN/../nvidia/cublas/lib) "
        "reaches them as in one site-packages after pip install"
    )


def _failed(env: LoadEnvironment, done: subprocess.CompletedProcess[str]) -> LoadEnvironment:
    failure = _pip_failure(done)
    if "--only-binary" in done.args and "from versions: none" in failure:
        failure += (
            " (pip installs wheels only here, --only-binary :all:: a requirement that exists only as an "
            "sdist would run its build code; --allow-sdist lets pip build it)"
        )
    return replace(env, failure=failure)


def cleanup(env: LoadEnvironment | None, keep: bool) -> None:
    if env is not None and env.directory and not keep:
        shutil.rmtree(env.directory, ignore_errors=True)
