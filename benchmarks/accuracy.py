#!/usr/bin/env python3
"""Benchmark: accuracy of cudaship's static load verdicts, measured against the real loader on a corpus of
popular CUDA wheels from PyPI (issue 21, item 5). Network, slow; not part of the test run.

The corpus is ``benchmarks/accuracy_corpus.toml``: per wheel its project, version, platform, file name, URL,
sha256 and size (from PyPI's JSON API) and why it is there. Subcommands:

- ``download``: fetch every corpus wheel into ``~/.cache/cudaship-accuracy/`` (``$CUDASHIP_ACCURACY_CACHE``),
  each checked against its sha256 and renamed into place atomically (a wheel already there with the right
  digest is kept).
- ``static``: run ``cudaship audit --format json`` (default policy, online) on every wheel; the JSON reports
  are kept in the cache's ``static/`` folder.
- ``load``: for Linux wheels, ``cudaship audit --load --format json`` (the loader oracle), kept in ``load/``.
- ``report``: the tables of docs/accuracy.md from the kept results (``--output FILE`` replaces the text
  between its markers; ``--json FILE`` writes every library's verdicts).
- ``all``: the four in turn.

``--src DIR`` runs another checkout's cudaship and ``--results DIR`` keeps its results apart, on the same
downloaded wheels. docs/accuracy.md says what is measured and how.

Usage: python benchmarks/accuracy.py {download,static,load,report,all} [--only PROJECT ...] [--added DAY]
       [--jobs N] [--output FILE] [--json FILE] [--src DIR] [--results DIR]
"""

# ruff: noqa: E402  (the path fix below must run before the imports)
from __future__ import annotations

import os
import sys

# Run as a script, this directory is sys.path[0], and benchmarks/inspect.py would shadow the standard
# ``inspect``.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse
import concurrent.futures
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


ROOT = Path(_HERE).parent
CORPUS_FILE = Path(_HERE) / "accuracy_corpus.toml"


@dataclass(frozen=True)
class CorpusWheel:
    project: str
    version: str
    platform: str  #: "linux", "windows" or "macos" (the loader side runs Linux wheels only)
    filename: str
    url: str
    sha256: str
    size: int
    why: str
    #: what the documented installation adds (extras, the framework it plugs into): ``audit --load --with``
    install: tuple[str, ...] = ()
    #: the day the entry joined the corpus (``--added`` selects one batch), None for the first 61
    added: str | None = None
    #: a documented prerequisite installed on the system, not by pip (holoscan-cu12: "CUDA Runtime 12.6 or
    #: above"): wheels whose libraries stand in for it, put on the loader's LD_LIBRARY_PATH (``system_paths``)
    system: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.project}=={self.version} ({self.platform})"


def cache_root() -> Path:
    env = os.environ.get("CUDASHIP_ACCURACY_CACHE")
    path = Path(env) if env else Path.home() / ".cache" / "cudaship-accuracy"
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_corpus(path: Path = CORPUS_FILE) -> list[CorpusWheel]:
    with path.open("rb") as handle:
        data = tomllib.load(handle)
    return [
        CorpusWheel(
            **{**row, "install": tuple(row.get("install", ())), "system": tuple(row.get("system", ()))}
        )
        for row in data["wheel"]
    ]


def wheel_path(wheel: CorpusWheel) -> Path:
    return cache_root() / "wheels" / wheel.filename


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def download(wheel: CorpusWheel) -> tuple[CorpusWheel, str]:
    """Fetch one wheel (sha256 verified, renamed into place atomically); returns a one-line outcome."""
    target = wheel_path(wheel)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and target.stat().st_size == wheel.size and _sha256(target) == wheel.sha256:
        return wheel, "cached"
    fd, tmp_name = tempfile.mkstemp(prefix=".part-", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(wheel.url, timeout=120) as response:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != wheel.sha256:
            raise OSError(f"sha256 mismatch: got {digest.hexdigest()}, corpus says {wheel.sha256}")
        os.replace(tmp, target)
        return wheel, "downloaded"
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def cmd_download(wheels: list[CorpusWheel], jobs: int) -> int:
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(download, w): w for w in wheels}
        for future in concurrent.futures.as_completed(futures):
            wheel = futures[future]
            try:
                _, outcome = future.result()
                print(f"{outcome:10} {wheel.filename}", flush=True)
            except Exception as exc:  # one line per failure, the run goes on
                failures += 1
                print(f"FAILED     {wheel.filename}: {exc}", flush=True)
    return 1 if failures else 0


def results_root() -> Path:
    """Where the static and load results go: ``$CUDASHIP_ACCURACY_RESULTS`` (``--results``), else the cache.
    Separate folders let two checkouts be measured on the same downloaded wheels."""
    env = os.environ.get("CUDASHIP_ACCURACY_RESULTS")
    return Path(env) if env else cache_root()


def source_root() -> Path:
    """The cudaship sources run: ``$CUDASHIP_SRC`` (``--src``), else this checkout's ``src``."""
    env = os.environ.get("CUDASHIP_SRC")
    return Path(env) if env else ROOT / "src"


def static_dir() -> Path:
    path = results_root() / "static"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cudaship_command() -> list[str]:
    """The cudaship CLI (:func:`source_root` first on the path), run by this Python."""
    return [sys.executable, "-m", "cudaship"]


def cudaship_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source_root()), env.get("PYTHONPATH")]))
    return env


def run_static(wheel: CorpusWheel) -> dict:
    """``cudaship audit --format json`` (default policy, online) on one wheel; kept with its exit code."""
    started = time.monotonic()
    proc = subprocess.run(
        [
            *cudaship_command(),
            "audit",
            "--format",
            "json",
            "--no-progress",
            "--jobs",
            "1",
            str(wheel_path(wheel)),
        ],
        capture_output=True,
        text=True,
        env=cudaship_env(),
        cwd=tempfile.gettempdir(),  # no pyproject.toml / cudaship.toml of this checkout as the policy
        check=False,
    )
    try:
        report = json.loads(proc.stdout) if proc.stdout.strip() else None
    except json.JSONDecodeError:
        report = None
    result = {
        "filename": wheel.filename,
        "exit_code": proc.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "stderr": proc.stderr[-4000:],
        "report": report,
    }
    _write_json_atomic(static_dir() / f"{wheel.filename}.json", result)
    return result


def _write_json_atomic(path: Path, data: object) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".part-", dir=path.parent)
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, indent=1)
    os.replace(tmp, path)


def cmd_static(wheels: list[CorpusWheel], jobs: int) -> int:
    present = [w for w in wheels if wheel_path(w).exists()]
    for missing in sorted(set(wheels) - set(present), key=lambda w: w.filename):
        print(f"not downloaded: {missing.filename}", flush=True)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for result in pool.map(run_static, present):
            print(f"exit {result['exit_code']}  {result['seconds']:7.1f} s  {result['filename']}", flush=True)
    return 0


# --- loader side ------------------------------------------------------------------------------------------
#
# ``cudaship audit --load --format json`` per Linux wheel: pip installs the wheel (its declared requirements,
# plus what the corpus entry's ``install`` adds) into a fresh virtual environment, fresh children import its
# top-level packages and dlopen each native library, and the oracle compares what the loader mapped with the
# static verdicts.
#
# Wheels whose libraries link torch (declared or not) go into one shared environment with torch preinstalled
# (``--torch-spec``, default the release this machine's pip is capped at), since a fresh torch per wheel is
# ~5.5 GB of disk and minutes of install: ``pip install WHEEL torch==<its torch>`` there first (so pip brings
# the wheel's requirements, and refuses what would replace torch: reported as not installable here), then
# ``audit --load --load-python`` that environment.

TORCH_LIBS = ("libtorch", "libc10", "c10.dll", "torch_cpu", "torch_cuda")


def venv_root() -> Path:
    path = cache_root() / "venvs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def pip_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PIP_CACHE_DIR", str(cache_root() / "pip"))
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _base_python() -> str:
    return getattr(sys, "_base_executable", None) or sys.executable


def make_venv(path: Path) -> Path:
    subprocess.run([_base_python(), "-m", "venv", str(path)], check=True, capture_output=True)
    return path / "bin" / "python"


def pip_install(python: Path, args: list[str], timeout: int) -> tuple[bool, str]:
    try:
        proc = subprocess.run(
            [str(python), "-m", "pip", "install", "--only-binary=:all:", "-q", *args],
            capture_output=True,
            text=True,
            env=pip_env(),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False, f"pip install timed out after {timeout} s"
    # this machine's pip configuration names local indexes; their "Location ... is ignored" lines are noise
    lines = [line for line in (proc.stderr or proc.stdout).strip().splitlines() if "is ignored:" not in line]
    tail = lines[-4:]
    return proc.returncode == 0, " | ".join(tail)


def system_paths(specs: tuple[str, ...]) -> list[str]:
    """The library directories of ``specs`` (``nvidia-cuda-runtime-cu12==12.6.*``) installed with ``pip
    install --no-deps --target`` under the cache's venvs: what a documented system prerequisite puts on the
    loader's search path (a CUDA runtime installed by the distribution's packages), given to the loader by
    LD_LIBRARY_PATH. Not a local toolkit's directory (knowledge/data/local_toolkits.toml), so the oracle
    counts it as the system's."""
    key = hashlib.sha256("\n".join(sorted(specs)).encode()).hexdigest()[:12]
    target = venv_root() / f"system-{key}"
    if not (target / ".ready").exists():
        shutil.rmtree(target, ignore_errors=True)
        ok, tail = pip_install(
            Path(sys.executable), ["--no-deps", "--target", str(target), *specs], timeout=600
        )
        if not ok:
            raise OSError(f"could not install {', '.join(specs)}: {tail}")
        (target / ".ready").write_text("\n".join(specs))
    return sorted({str(p.parent) for p in target.rglob("lib*.so*") if p.is_file()})


def needs_torch(result: dict | None, wheel: CorpusWheel) -> bool:
    """The wheel's libraries link torch's (from the inspect-free static report: closure evidence or imports),
    or it declares torch."""
    with zipfile.ZipFile(wheel_path(wheel)) as zf:
        meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
        text = zf.read(meta).decode("utf-8", "replace") if meta else ""
    if re.search(r"^Requires-Dist: torch\b", text, re.M):
        return True
    if result and result.get("report"):
        blob = json.dumps(result["report"])
        return any(name in blob for name in TORCH_LIBS)
    return False


def torch_env(spec: str) -> Path:
    path = venv_root() / "torch-shared"
    python = path / "bin" / "python"
    if not (path / ".ready").exists():
        shutil.rmtree(path, ignore_errors=True)
        make_venv(path)
        ok, tail = pip_install(python, [spec], timeout=3000)
        if not ok:
            raise OSError(f"could not install {spec}: {tail}")
        (path / ".ready").write_text(spec)
    return python


def run_load_cudaship(wheel: CorpusWheel, torch_spec: str, timeout: int) -> dict:
    """``cudaship audit --load --format json``: pip installs the wheel into a fresh venv (requirements
    resolved by pip) and the oracle loads it. Wheels that link torch run in the shared torch environment
    (``--load-python``), after ``pip install WHEEL torch==<its torch>`` there brought their requirements."""
    started = time.monotonic()
    static = _read_json(static_dir() / f"{wheel.filename}.json")
    args = [*cudaship_command(), "audit", "--load", "--format", "json", "--no-progress", "--jobs", "1"]
    args += ["--load-timeout", str(timeout)]
    environment = "fresh venv"
    install_note = None
    if needs_torch(static, wheel):
        python = torch_env(torch_spec)
        torch_version = subprocess.run(
            [str(python), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        ok, tail = pip_install(
            python, [str(wheel_path(wheel)), *wheel.install, f"torch=={torch_version}"], timeout=1800
        )
        environment = f"shared torch {torch_version} environment"
        if not ok:
            install_note = f"does not install next to torch {torch_version}: {tail}"
        args += ["--load-python", str(python)]
    else:
        for requirement in wheel.install:
            own = _own_extras(wheel.project, requirement)
            if own is not None:  # the wheel's own extras: installed with it, and known to the comparison
                for extra in own:
                    args += ["--extra", extra]
            else:
                args += ["--with", requirement]
    extra_env: dict[str, str] = {}
    if wheel.system:
        paths = system_paths(wheel.system)
        extra_env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [*paths, *filter(None, [os.environ.get("LD_LIBRARY_PATH")])]
        )
        environment += f"; the documented system prerequisite {', '.join(wheel.system)} on LD_LIBRARY_PATH"
    result: dict = {"filename": wheel.filename, "loader": "cudaship", "environment": environment}
    if install_note:
        result.update(exit_code=None, report=None, install_note=install_note)
    else:
        proc = subprocess.run(
            [*args, str(wheel_path(wheel))],
            capture_output=True,
            text=True,
            env={**pip_env(), **cudaship_env(), **extra_env},
            cwd=tempfile.gettempdir(),
            check=False,
        )
        try:
            report = json.loads(proc.stdout) if proc.stdout.strip() else None
        except json.JSONDecodeError:
            report = None
        result.update(exit_code=proc.returncode, report=report, stderr=proc.stderr[-4000:])
    result["seconds"] = round(time.monotonic() - started, 1)
    _write_json_atomic(load_dir() / f"{wheel.filename}.cudaship.json", result)
    return result


def load_dir() -> Path:
    path = results_root() / "load"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def cmd_load(wheels: list[CorpusWheel], torch_spec: str, timeout: int) -> int:
    linux = [w for w in wheels if w.platform == "linux" and wheel_path(w).exists()]
    for wheel in sorted(linux, key=lambda w: w.size):
        try:
            res = run_load_cudaship(wheel, torch_spec, timeout)
        except Exception as exc:  # one line per wheel, the run goes on
            print(f"FAILED {wheel.filename}: {exc}", flush=True)
            continue
        load = ((res.get("report") or {}).get("wheels") or [{}])[0].get("load") or {}
        line = load.get("line") or res.get("install_note") or (res.get("stderr") or "")[-200:]
        print(f"{res['seconds']:7.1f} s  exit {res['exit_code']}  {wheel.filename}: {line}", flush=True)
    return 0


# --- report -----------------------------------------------------------------------------------------------

#: libraries only the NVIDIA driver installs: a library or import that fails on one of them is not judged on a
#: machine without a driver (this one)
DRIVER_ONLY = re.compile(r"\blibcuda\.so\.1\b|\blibnvidia-[\w-]+\.so\.1\b|\blibnvcuvid\.so\.1\b")

#: an extension module built for one CPython release (``.cpython-312-x86_64-linux-gnu.so``)
CPYTHON_TAG = re.compile(r"\.cpython-(3\d+)t?-")


def _own_extras(project: str, requirement: str) -> list[str] | None:
    """The extras of ``requirement`` when it names the wheel's own project (``cupy-cuda13x[ctk]==14.2.0``)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    req = Requirement(requirement)
    if canonicalize_name(req.name) != canonicalize_name(project):
        return None
    return sorted(req.extras)


#: the oracle's rules for a library it does not count (checks/load.py), and how the report says why
_NOT_COUNTED = {
    "on_demand": "loaded on demand by the package (a convention the oracle knows)",
    "runtime": "CUDA libraries found by the package's own run-time lookup (not run by loading alone)",
    "extra": "needs what an extra installs, and that extra was not installed",
}


def for_another_python(member: str) -> bool:
    """An extension module of another CPython than the one loading it: not loadable there by design."""
    m = CPYTHON_TAG.search(member)
    return bool(m) and m.group(1) != f"{sys.version_info.major}{sys.version_info.minor}"


#: ELF e_machine of the loading side (x86_64): a library built for another machine never loads here
_EM_X86_64 = 62


def for_another_machine(wheel: CorpusWheel, member: str) -> bool:
    """A library of the wheel built for another machine than x86_64 (stub libraries an x86_64 wheel carries
    for aarch64 or QNX cross builds): not loadable here by design, like another Python's extension."""
    try:
        with zipfile.ZipFile(wheel_path(wheel)) as zf:
            head = zf.open(member).read(20)
    except (KeyError, OSError, zipfile.BadZipFile):
        return False
    if head[:4] != b"\x7fELF" or len(head) < 20:
        return False
    order = "little" if head[5] == 1 else "big"
    return int.from_bytes(head[18:20], order) != _EM_X86_64


#: the closure rules whose checks are one per cause (docs/audit.md, "One cause, once"), not one per library
CAUSE_RULES = frozenset(
    {
        "package_preload",
        "undeclared_host",
        "loaded_first",
        "distribution_library",
        "computed_path",
        "vendored_nvidia",
        "build_path",
    }
)


def static_library_verdicts(static: dict | None) -> dict[str, str]:
    """Per native library of the wheel: ``resolves``, or why not.

    The verdict is about resolution, not severity: with ``WheelAudit.imports`` in the report (every import's
    static verdict), a library resolves when each of its imports does, whatever severity a policy gives a
    failing one (an optional plugin's missing MPI is a note, and still does not resolve). Without it, the
    closure check of the library: an error is "does not resolve"."""
    out: dict[str, str] = {}
    report = (static or {}).get("report") or {}
    for check in report.get("checks", []):
        if check["family"] != "closure" or not check["name"].startswith("closure: "):
            continue
        member = check["name"].removeprefix("closure: ")
        if member.startswith("unused imports in ") or check.get("rule") in CAUSE_RULES:
            continue  # not a library: a check per cause (a host, a Python file, a system library, ...)
        if check["status"] == "fail" and check["severity"] == "error":
            ev = check.get("evidence") or []
            out[member] = ev[0]["message"] if ev else check["reason"]
        else:
            out.setdefault(member, "resolves")
    imports = static_imports(static)
    if imports:
        by_file: dict[str, str] = {member: "resolves" for member in out}
        for i in imports:
            current = by_file.setdefault(i["file"], "resolves")
            if not i.get("ok") and current == "resolves":
                by_file[i["file"]] = f"{i['library']} does not resolve: {i.get('detail') or i.get('via')}"
        return by_file
    return out


def cudaship_load(result: dict | None) -> dict | None:
    """The ``load`` part of an ``audit --load --format json`` report kept by the load step, or None."""
    report = (result or {}).get("report") or {}
    wheels = report.get("wheels") or []
    load = wheels[0].get("load") if wheels else None
    return load if load and not load.get("skipped") else None


def static_imports(result: dict | None) -> list[dict]:
    """``WheelAudit.imports`` of a kept report (every import's static verdict), empty when it has none."""
    wheels = ((result or {}).get("report") or {}).get("wheels") or []
    return list(wheels[0].get("imports") or []) if wheels else []


def transitive_verdicts(statics: dict[str, str], imports: list[dict]) -> dict[str, str]:
    """A library loads only when the shipped libraries it needs load too: its static verdict becomes the first
    failure found down its chain of shipped dependencies (the closure check judges direct entries only)."""
    edges: dict[str, list[str]] = {}
    for i in imports:
        if i.get("via") == "shipped" and i.get("target") in statics and i["target"] != i["file"]:
            edges.setdefault(i["file"], []).append(i["target"])
    out: dict[str, str] = {}

    def verdict(member: str, seen: frozenset[str]) -> str:
        if member in out:
            return out[member]
        own = statics.get(member, "resolves")
        if own != "resolves":
            return own
        for target in edges.get(member, []):
            if target in seen:
                continue
            below = verdict(target, seen | {member})
            if below != "resolves":
                return f"{target} does not load: {below}"
        return "resolves"

    for member in statics:
        out[member] = verdict(member, frozenset())
    return out


@dataclass
class LoaderLibrary:
    """What ``audit --load`` saw for one native library of the wheel."""

    loads: bool  #: dlopen succeeded after the imports (alone when the wheel has no top-level package)
    message: str | None  #: the loader's message when it did not
    entries_agree: bool = True  #: every DT_NEEDED comparison agrees (only meaningful when it loads)
    disagreeing: list[tuple[str, str, str]] = field(default_factory=list)  #: (DT_NEEDED, static, loader)


def cudaship_rows(load: dict) -> tuple[bool | None, dict[str, LoaderLibrary]]:
    """From ``audit --load``'s JSON: whether every top-level import worked, and per native library what the
    loader did."""
    probes = load.get("probes", [])
    # what counts is native loading: a private top-level module (``_foo``) is not the package's API, and a
    # Python module an optional tool needs (ModuleNotFoundError) is not a loader verdict
    failed_imports = [
        p
        for p in probes
        if p["label"].startswith("import ")
        and not p["ok"]
        and not p["label"].removeprefix("import ").startswith("_")
        and not (p.get("message") or "").startswith("ModuleNotFoundError")
    ]
    imports_ok: bool | None = not failed_imports
    if failed_imports and all(DRIVER_ONLY.search(p.get("message") or "") for p in failed_imports):
        imports_ok = None  # needs the NVIDIA driver, which this machine lacks: not judged here
    out: dict[str, LoaderLibrary] = {}
    for p in probes:
        m = re.match(r"dlopen (\S+)( \(after import .*\))?$", p["label"])
        if m and (m.group(2) or m.group(1) not in out):
            out[m.group(1)] = LoaderLibrary(p["ok"], p.get("message"))
    for c in load.get("comparisons", []):
        lib = out.setdefault(c["file"], LoaderLibrary(True, None))
        if c["agree"] is False:  # None: the loader could not say (the library did not load)
            lib.entries_agree = False
            lib.disagreeing.append((c["library"], c["static"], c["loader"]))
    return imports_ok, out


@dataclass
class WheelRow:
    wheel: CorpusWheel
    exit_code: int | None
    libraries: int = 0
    agree: int = 0
    compared: int = 0
    install: str = "-"
    imports_ok: bool | None = None
    libraries_fail: int = 0  #: libraries the loader could not load after the imports
    disagreements: list[tuple[str, str, str]] = field(default_factory=list)
    note: str | None = None
    load_seconds: float | None = None  #: wall time of the load step for this wheel (pip install included)
    #: libraries not compared here, with why (an extension for another Python, one that needs the driver)
    excluded: list[tuple[str, str]] = field(default_factory=list)
    entries_agree: int = 0  #: libraries whose verdicts agree and (when they load) every entry's file too
    #: libraries both sides say load, with a DT_NEEDED the loader satisfied with another file than the audit's
    other_file: list[tuple[str, str, str]] = field(default_factory=list)
    #: per library: file, static verdict, loader loads it, agree
    per_library: list[dict] = field(default_factory=list)


def build_rows(wheels: list[CorpusWheel]) -> list[WheelRow]:
    rows = []
    for wheel in wheels:
        static = _read_json(static_dir() / f"{wheel.filename}.json")
        row = WheelRow(wheel, static["exit_code"] if static else None)
        statics = static_library_verdicts(static)
        row.libraries = len(statics)
        kept = _read_json(load_dir() / f"{wheel.filename}.cudaship.json")
        statics = transitive_verdicts(statics, static_imports(static) or static_imports(kept))
        oracle = cudaship_load(kept)
        if kept is not None:
            row.load_seconds = kept.get("seconds")
        if kept is not None and kept.get("install_note"):
            row.install = "not here"
            row.note = kept["install_note"]
        if oracle is not None:
            row.install = "ok"
            row.imports_ok, per_library = cudaship_rows(oracle)
            # a library that loaded only through this machine's own CUDA toolkit (rule load.toolkit) does not
            # load on a user's machine without one: the loader's verdict is "does not load"
            for c in (kept or {}).get("report", {}).get("checks", []):
                if c["family"] == "load" and c["status"] == "fail" and c.get("rule") == "toolkit":
                    member = c["name"].removeprefix("load: ").split(" ", 1)[0]
                    if member in per_library:
                        per_library[member].loads = False
                        per_library[member].message = c["reason"]
            # the oracle's own "not counted" rules: what loading alone cannot exercise
            not_counted = {}
            for c in (kept or {}).get("report", {}).get("checks", []):
                if c["family"] == "load" and c["status"] == "fail" and c.get("rule") in _NOT_COUNTED:
                    member = c["name"].removeprefix("load: ").split(" ", 1)[0]
                    not_counted.setdefault(member, _NOT_COUNTED[c["rule"]])
            for member, lib in sorted(per_library.items()):
                if member in not_counted and not lib.loads:
                    row.excluded.append((member, not_counted[member]))
                    continue
                if for_another_python(member):
                    row.excluded.append((member, "an extension module for another Python"))
                    continue
                if for_another_machine(wheel, member):
                    row.excluded.append((member, "built for another machine"))
                    continue
                if not lib.loads and DRIVER_ONLY.search(lib.message or ""):
                    row.excluded.append((member, "needs the NVIDIA driver: " + _short(lib.message or "", 90)))
                    continue
                static_text = statics.get(member, "resolves")
                static_ok = static_text == "resolves"
                # the verdicts agree when both say it loads, or both say it does not; when both say it loads,
                # the entry-level figure also asks that every DT_NEEDED was mapped to the file the audit named
                agree = static_ok == lib.loads
                row.per_library.append(
                    {
                        "file": member,
                        "static": static_text,
                        "loader_loads": lib.loads,
                        "loader_message": lib.message,
                        "agree": agree,
                        "entries_agree": lib.entries_agree if lib.loads else None,
                    }
                )
                row.compared += 1
                row.libraries_fail += not lib.loads
                row.agree += agree
                row.entries_agree += agree and (not lib.loads or lib.entries_agree)
                if not agree:
                    if lib.loads:
                        for library, static_entry, loader_entry in lib.disagreeing or [
                            ("-", static_text, "loads")
                        ]:
                            row.disagreements.append((f"{member} -> {library}", static_entry, loader_entry))
                    else:
                        row.disagreements.append((member, "resolves", lib.message or "does not load"))
                elif lib.loads and not lib.entries_agree:
                    for library, static_entry, loader_entry in lib.disagreeing:
                        row.other_file.append((f"{member} -> {library}", static_entry, loader_entry))
            rows.append(row)
            continue
        rows.append(row)
    return rows


def render(rows: list[WheelRow]) -> str:
    lines = [
        "| project | version | platform | size (MB) | audit exit | libraries | loader: install | imports | "
        "libraries the loader loads | libraries agreeing | load s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        w = r.wheel
        imports = (
            ("needs driver" if r.install == "ok" else "-")
            if r.imports_ok is None
            else ("ok" if r.imports_ok else "fail")
        )
        agree = f"{r.agree}/{r.compared}" if r.compared else "-"
        loads = f"{r.compared - r.libraries_fail}/{r.compared}" if r.compared else "-"
        exit_code = "-" if r.exit_code is None else str(r.exit_code)
        lines.append(
            f"| {w.project} | {w.version} | {w.platform} | {w.size / 1e6:.0f} | {exit_code} "
            f"| {r.libraries} | "
            f"{r.install} | {imports} | {loads} | {agree} | "
            f"{'-' if r.load_seconds is None else f'{r.load_seconds:.0f}'} |"
        )
    compared = sum(r.compared for r in rows)
    agree = sum(r.agree for r in rows)
    loaded = [r for r in rows if r.imports_ok]
    cried_wolf = [r for r in loaded if r.exit_code]
    whole = [r for r in loaded if not r.libraries_fail]
    whole_wolf = [r for r in whole if r.exit_code]
    small = sorted(
        r.load_seconds
        for r in rows
        if r.load_seconds is not None and r.install == "ok" and r.wheel.size < 100e6
    )
    driver_only = sum(1 for r in rows for _, why in r.excluded if "driver" in why)
    other_python = sum(1 for r in rows for _, why in r.excluded if "another Python" in why)
    other_machine = sum(1 for r in rows for _, why in r.excluded if "another machine" in why)
    demand = sum(1 for r in rows for _, why in r.excluded if "on demand" in why)
    runtime = sum(1 for r in rows for _, why in r.excluded if "run-time lookup" in why)
    extra = sum(1 for r in rows for _, why in r.excluded if "an extra" in why)
    not_loaded = [
        f"{r.wheel.project} ({_short(r.note or r.install, 120)})"
        for r in rows
        if r.wheel.platform == "linux" and r.install != "ok"
    ]
    pct = f"{100 * agree / compared:.1f}%" if compared else "n/a"
    entries = sum(r.entries_agree for r in rows)
    epct = f"{100 * entries / compared:.1f}%" if compared else "n/a"
    lines += [
        "",
        f"- wheels: {len(rows)} ({sum(r.wheel.platform == 'linux' for r in rows)} Linux, "
        f"{sum(r.wheel.platform == 'windows' for r in rows)} Windows, "
        f"{sum(r.wheel.platform == 'macos' for r in rows)} macOS); default audit exits non-zero on "
        f"{sum(1 for r in rows if r.exit_code)}",
        f"- libraries compared with the loader: {compared}; static and loader verdicts (loads / does not) "
        f"agree on {agree} ({pct}); counting also every DT_NEEDED mapped to the file the audit named: "
        f"{entries} ({epct})",
        f"- wheels that install and import here: {len(loaded)}; of those, failing the default audit: "
        f"{len(cried_wolf)}" + (f" ({', '.join(r.wheel.project for r in cried_wolf)})" if cried_wolf else ""),
        f"- wheels that import and whose every native library loads after the imports: {len(whole)}; "
        f"of those, failing the default audit: {len(whole_wolf)}"
        + (f" ({', '.join(r.wheel.project for r in whole_wolf)})" if whole_wolf else ""),
        "- Linux wheels not loaded here: " + (", ".join(not_loaded) or "none"),
        f"- `audit --load` wall time for the {len(small)} loaded wheels under 100 MB (pip installing every "
        f"requirement, shared pip cache): median {_median(small):.0f} s, "
        f"{sum(1 for t in small if t <= 60)} within 60 s, longest {max(small, default=0):.0f} s",
        f"- libraries not compared: {sum(len(r.excluded) for r in rows)} ({driver_only} need the NVIDIA "
        f"driver, {other_python} are extension modules for another Python, {other_machine} are built for "
        f"another machine, {demand} are loaded on demand, "
        f"{runtime} need the package's own run-time lookup, {extra} need an extra not installed)",
        "",
        "### Disagreements",
        "",
    ]
    lines += _grouped(rows, "disagreements")
    lines += ["", "### Same verdict, another file", ""]
    lines += _grouped(rows, "other_file")
    return "\n".join(lines) + "\n"


def _median(values: list[float]) -> float:
    if not values:
        return 0.0
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _grouped(rows: list[WheelRow], attribute: str) -> list[str]:
    """One line per wheel, DT_NEEDED and (static, loader) text, naming how many libraries it covers."""
    lines = []
    for r in rows:
        groups: dict[tuple[str, str, str], list[str]] = {}
        for member, static, loader in getattr(r, attribute):
            file, _, library = member.partition(" -> ")
            key = (library or "the library", _normalise(static), _normalise(loader))
            groups.setdefault(key, []).append(file)
        for (library, static, loader), files in groups.items():
            where = f"`{files[0]}`" if len(files) == 1 else f"{len(files)} libraries (`{files[0]}`, ...)"
            lines.append(
                f"- {r.wheel.project} {r.wheel.version}: {library} of {where}: static: {_short(static)}; "
                f"loader: {_short(loader)}"
            )
    return lines or ["(none)"]


def _normalise(text: str) -> str:
    """One disagreement's text without what differs from library to library (the folders searched)."""
    return re.sub(r"\s*\(searched: [^)]*\)", "", text)


def _short(text: str, limit: int = 220) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


BEGIN, END = "<!-- accuracy:begin (benchmarks/accuracy.py report) -->", "<!-- accuracy:end -->"


def render_corpus(wheels: list[CorpusWheel]) -> str:
    lines = ["| project | version | platform | file | MB | why |", "|---|---|---|---|---|---|"]
    for w in wheels:
        lines.append(
            f"| {w.project} | {w.version} | {w.platform} | [{w.filename}]({w.url}) "
            f"| {w.size / 1e6:.0f} | {w.why} |"
        )
    return "\n".join(lines) + "\n"


def cmd_report(wheels: list[CorpusWheel], output: str | None, json_file: str | None = None) -> int:
    """The tables; with ``--output FILE`` holding the markers, only the text between them is replaced;
    ``--json FILE``: every wheel's figures and every library's verdicts."""
    rows = build_rows(wheels)
    if json_file:
        data = [
            {
                "project": r.wheel.project,
                "version": r.wheel.version,
                "platform": r.wheel.platform,
                "filename": r.wheel.filename,
                "audit_exit": r.exit_code,
                "install": r.install,
                "imports_ok": r.imports_ok,
                "libraries": r.per_library,
                "note": r.note,
            }
            for r in rows
        ]
        _write_json_atomic(Path(json_file).resolve(), data)
    text = "### Results\n\n" + render(rows) + "\n### The corpus\n\n" + render_corpus(wheels)
    if not output:
        sys.stdout.write(text)
        return 0
    path = Path(output)
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        new = f"{head}{BEGIN}\n\n{text}\n{END}{tail}"
    else:
        new = f"{old}{BEGIN}\n\n{text}\n{END}\n"
    path.write_text(new)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Accuracy of cudaship's static load verdicts against the real loader (docs/accuracy.md)."
    )
    parser.add_argument("command", choices=["download", "static", "load", "report", "all"])
    parser.add_argument("--only", action="append", default=[], help="only these projects (repeatable)")
    parser.add_argument(
        "--added", help="only the entries added on this day (their `added` field, e.g. 2026-12-05)"
    )
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--torch-spec", default="torch==2.14.1", help="torch of the shared environment")
    parser.add_argument("--load-timeout", type=int, default=120, help="seconds per child process")
    parser.add_argument("--json", help="report: also write every library's verdicts to this JSON file")
    parser.add_argument("--output", help="report: write the tables to this file")
    parser.add_argument("--results", help="folder for the static and load results (default: the cache)")
    parser.add_argument("--src", help="the cudaship sources to run (default: this checkout's src)")
    args = parser.parse_args(argv)
    if args.results:
        os.environ["CUDASHIP_ACCURACY_RESULTS"] = str(Path(args.results).resolve())
    if args.src:
        os.environ["CUDASHIP_SRC"] = str(Path(args.src).resolve())
    wheels = load_corpus()
    if args.only:
        wheels = [w for w in wheels if w.project in args.only]
    if args.added:
        wheels = [w for w in wheels if w.added == args.added]
    if args.command == "all":
        return (
            cmd_download(wheels, args.jobs)
            or cmd_static(wheels, args.jobs)
            or cmd_load(wheels, args.torch_spec, args.load_timeout)
            or cmd_report(wheels, args.output, args.json)
        )
    if args.command == "download":
        return cmd_download(wheels, args.jobs)
    if args.command == "static":
        return cmd_static(wheels, args.jobs)
    if args.command == "report":
        return cmd_report(wheels, args.output, args.json)
    if args.command == "load":
        return cmd_load(wheels, args.torch_spec, args.load_timeout)
    return 2


if __name__ == "__main__":
    sys.exit(main())
