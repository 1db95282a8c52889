"""``cudaship cmake``: the CMake configuration a CUDA build needs for a train and platform.

Three parts, so the rules are testable without a toolchain:

- probes (:func:`probe_host`, :func:`locate_toolkit`) look at this machine: PATH, ``CUDACXX``, ``CUDAFLAGS``,
  the toolkit and its nvcc release;
- :func:`plan` is a pure function of (train, platform, arch list, C++ standard, host, toolkit) and the rules
  in ``knowledge/data/cmake_rules.toml``, returning every decision with its reason;
- renderers write CMake arguments, an initial cache (``cmake -C``) or JSON.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudaship import envvars
from cudaship.ci.archs import TrainInfo, normalize_machine
from cudaship.errors import ToolkitError, UsageError
from cudaship.knowledge import _data
from cudaship.knowledge.archs import ArchList, format_arch_list
from cudaship.knowledge.platforms import cuda_platforms, platform_names
from cudaship.loaders import read_json
from cudaship.once import once
from cudaship.toolkit.records import TOOLKIT_MANIFEST as TOOLKIT_MANIFEST  # at every toolkit root

_RELEASE_RE = re.compile(r"release (\d+)\.(\d+)")
_CUDA_H_RE = re.compile(r"#define\s+CUDA_VERSION\s+(\d+)")


# ---------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class BuildHost:
    """What the build machine offers. ``os`` is the build host's (``linux`` or ``windows``)."""

    os: str
    ninja: str | None = None  #: ninja on PATH
    clang_cl: str | None = None  #: clang-cl on PATH
    cudacxx: str | None = None  #: $CUDACXX
    cudaflags: str | None = None  #: $CUDAFLAGS


@dataclass(frozen=True)
class Toolkit:
    """A located CUDA toolkit."""

    root: Path
    source: str  #: --toolkit, CUDASHIP_TOOLKIT, CUDA_HOME, CUDA_PATH, PATH
    nvcc: Path | None  #: the nvcc that ran, when one did
    release: str  #: ``13.0``
    release_from: (
        str  #: how the release was read: nvcc --version, cudaship-toolkit.json, version.json, cuda.h
    )
    cudaship_toolkit: bool = False  #: the root was assembled by ``cudaship toolkit``


@dataclass(frozen=True)
class CacheEntry:
    name: str
    value: str
    type: str  #: STRING, FILEPATH, PATH, BOOL
    reason: str


@dataclass(frozen=True)
class Decision:
    key: str
    value: str | None  #: None: deliberately not set
    reason: str


@dataclass(frozen=True)
class CMakePlan:
    train: str
    cuda: str
    platform: str
    os: str
    machine: str
    generator: str
    toolset: str | None
    multi_config: bool
    entries: tuple[CacheEntry, ...]
    decisions: tuple[Decision, ...]
    toolkit: Toolkit | None
    warnings: tuple[str, ...] = field(default=())

    def entry(self, name: str) -> CacheEntry | None:
        return next((e for e in self.entries if e.name == name), None)


# ---------------------------------------------------------------------------------------------- rules


@once
def rules() -> dict[str, Any]:
    """``knowledge/data/cmake_rules.toml``."""
    return _data.load("cmake_rules.toml")


def _rule(*keys: str) -> Any:
    table = _data.document("cmake_rules.toml")
    for key in keys[:-1]:
        table = table.table(key)
    return table.require(keys[-1])


def cuda_flags(os_name: str, train: TrainInfo) -> list[tuple[list[str], str]]:
    """The extra CUDA flags of ``train`` on ``os_name``: (flags, reason) per matching rule."""
    found = []
    for rule in _rule("cuda_flags"):
        low = tuple(int(p) for p in str(rule["min_train"]).split("."))
        if rule["os"] == os_name and train.key >= low:
            found.append(([str(f) for f in rule["flags"]], str(rule["reason"])))
    return found


def cuda_standards(train: TrainInfo) -> tuple[int, ...]:
    table = _rule("cuda_standards")
    return tuple(int(s) for s in table.get(str(train.key[0]), ()))


def cmake_architectures(archs: ArchList) -> str:
    """``CMAKE_CUDA_ARCHITECTURES`` as ``arch-list --format cmake`` spells it (one spelling for both): SASS
    only ``-real``, PTX only ``-virtual``, both a bare number: ``80-real;...;100-real;120``."""
    return format_arch_list(archs, "cmake")


def parse_platform(text: str) -> tuple[str, str, str]:
    """``linux-x86_64`` -> (name, os, machine)."""
    key = text.strip().lower()
    known = platform_names()
    if key not in known:
        names = ", ".join(p.name for p in cuda_platforms())
        raise UsageError(f"unknown platform {text!r} (known: {names})")
    os_name, machine = known[key]
    return key, os_name, machine


# ---------------------------------------------------------------------------------------------- the plan


def _toolkit_os(toolkit: Toolkit) -> str | None:
    """The OS a toolkit is for, when its nvcc ran (``nvcc.exe``: windows), else None (not known)."""
    if toolkit.nvcc is None:
        return None
    return "windows" if toolkit.nvcc.name.lower().endswith(".exe") else "linux"


@dataclass
class _PlanNotes:
    """What :func:`plan`'s steps accumulate: cache entries (each also a decision), decisions, warnings."""

    entries: list[CacheEntry] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def set_(self, entry_name: str, value: str, type_: str, reason: str) -> None:
        self.entries.append(CacheEntry(entry_name, value, type_, reason))
        self.decisions.append(Decision(entry_name, value, reason))

    def decide(self, name: str, value: str | None, reason: str) -> None:
        self.decisions.append(Decision(name, value, reason))


def _usable_toolkit(
    notes: _PlanNotes, toolkit: Toolkit | None, train: TrainInfo, name: str, os_name: str
) -> Toolkit | None:
    """The toolkit the plan may use: None when none was located or it belongs to another OS."""
    if toolkit is not None and _toolkit_os(toolkit) not in (None, os_name):
        # a toolkit whose nvcc runs here is this machine's: its paths and its nvcc are no use to a build for
        # another OS (a Linux /usr/local/cuda/bin/nvcc.exe does not exist)
        foreign = f"{toolkit.root.as_posix()} ({toolkit.source}) is a {_toolkit_os(toolkit)} toolkit"
        notes.decide(
            "toolkit",
            None,
            f"{foreign}, not a {os_name} one: CMAKE_CUDA_COMPILER and CUDAToolkit_ROOT are left for the "
            f"{os_name} build machine",
        )
        notes.warnings.append(
            f"{foreign}: run `cudaship cmake` on the {os_name} build machine, or pass --toolkit with a "
            f"{os_name} toolkit (`cudaship toolkit install {train.tag} --platform {name}`), to set the CUDA "
            "compiler"
        )
        return None
    if toolkit is not None:
        via = f", nvcc {toolkit.nvcc.as_posix()}" if toolkit.nvcc else ""
        notes.decide(
            "toolkit",
            toolkit.root.as_posix(),
            f"from {toolkit.source}{via}: CUDA {toolkit.release} by {toolkit.release_from}",
        )
    else:
        notes.decide("toolkit", None, "no toolkit located")
    return toolkit


def _generator(
    notes: _PlanNotes, os_name: str, host: BuildHost, toolkit: Toolkit | None
) -> tuple[str, bool, str | None]:
    """The generator, whether it is multi-config, and the Visual Studio toolset (if any)."""
    gen = _rule("generators", os_name)
    if host.ninja:
        generator, multi, toolset = str(gen["ninja"]), os_name == "windows", None
        notes.decide("generator", generator, str(gen["ninja_reason"]))
        return generator, multi, toolset
    generator = str(gen["fallback"])
    multi = generator.startswith("Visual Studio")
    notes.decide("generator", generator, str(gen["fallback_reason"]))
    toolset = None
    if multi:
        if toolkit is not None:
            toolset = f"cuda={toolkit.root.as_posix()}"
            notes.decide("toolset", toolset, str(gen["toolset_reason"]))
        else:
            notes.decide("toolset", None, "no toolkit located: the default CUDA integration")
    return generator, multi, toolset


def _build_type(notes: _PlanNotes, multi: bool, visual_studio: bool) -> None:
    """Configurations for a multi-config generator, the build type for a single-config one."""
    if multi:
        notes.set_(
            "CMAKE_CONFIGURATION_TYPES",
            "Release;RelWithDebInfo;Debug",
            "STRING",
            "multi-config: outputs land in Release/ (the layout packaging expects)",
        )
        if not visual_studio:
            notes.set_(
                "CMAKE_DEFAULT_BUILD_TYPE",
                "Release",
                "STRING",
                "Ninja Multi-Config: `cmake --build` builds Release unless --config says otherwise",
            )
    else:
        notes.set_("CMAKE_BUILD_TYPE", "Release", "STRING", "single-config generator: a release build")


def _host_compilers(notes: _PlanNotes, windows: bool, visual_studio: bool, host: BuildHost) -> None:
    """clang-cl for a Windows build without Visual Studio; otherwise the generator's or CMake's default."""
    if windows and not visual_studio:
        comp = _rule("compilers", "windows")
        notes.set_("CMAKE_C_COMPILER", str(comp["c"]), "FILEPATH", str(comp["reason"]))
        notes.set_("CMAKE_CXX_COMPILER", str(comp["cxx"]), "FILEPATH", str(comp["reason"]))
        notes.set_("CMAKE_CUDA_HOST_COMPILER", str(comp["cuda_host"]), "FILEPATH", str(comp["reason"]))
        if host.os == "windows" and not host.clang_cl:
            notes.warnings.append(
                "clang-cl is not on PATH: install LLVM (or the VS 'C++ Clang tools') before configuring"
            )
    elif windows:
        notes.decide("compilers", None, "the Visual Studio generator uses its MSVC toolset")
    else:
        notes.decide("compilers", None, str(_rule("compilers", "linux", "reason")))


def _cuda_compiler(
    notes: _PlanNotes, windows: bool, visual_studio: bool, host: BuildHost, toolkit: Toolkit | None
) -> None:
    """CMAKE_CUDA_COMPILER unless Visual Studio or CUDACXX picks it; CUDAToolkit_ROOT from the toolkit."""
    cc = _rule("cuda_compiler")
    if visual_studio:
        notes.decide("CMAKE_CUDA_COMPILER", None, str(cc["vs_reason"]))
    elif host.cudacxx:
        notes.decide("CMAKE_CUDA_COMPILER", None, f"{cc['cudacxx_reason']} (CUDACXX={host.cudacxx})")
    elif toolkit is not None:
        nvcc = toolkit.root / "bin" / ("nvcc.exe" if windows else "nvcc")
        notes.set_(
            "CMAKE_CUDA_COMPILER",
            nvcc.as_posix(),
            "FILEPATH",
            f"{cc['reason']} ({toolkit.source}, CUDA {toolkit.release})",
        )
    if toolkit is not None:
        notes.set_(
            "CUDAToolkit_ROOT",
            toolkit.root.as_posix(),
            "PATH",
            "find_package(CUDAToolkit) finds the same toolkit as the compiler",
        )


def _standards(notes: _PlanNotes, train: TrainInfo, cxx_standard: int | None) -> None:
    """The C++ and CUDA standards from --cxx-standard, refused when this train's nvcc does not accept it."""
    std_rules = _rule("standards")
    if cxx_standard is None:
        notes.decide("CMAKE_CUDA_STANDARD", None, str(std_rules["unset_reason"]))
        return
    allowed = cuda_standards(train)
    if cxx_standard not in allowed:
        raise UsageError(
            f"--cxx-standard {cxx_standard}: nvcc of CUDA {train.version} accepts "
            f"{', '.join(map(str, allowed)) or 'no known standard'} as the CUDA standard"
        )
    notes.set_("CMAKE_CXX_STANDARD", str(cxx_standard), "STRING", "--cxx-standard")
    notes.set_("CMAKE_CXX_STANDARD_REQUIRED", "ON", "BOOL", "fail rather than fall back to an older standard")
    notes.set_("CMAKE_CUDA_STANDARD", str(cxx_standard), "STRING", str(std_rules["reason"]))
    notes.set_(
        "CMAKE_CUDA_STANDARD_REQUIRED", "ON", "BOOL", "fail rather than fall back to an older standard"
    )


def _cuda_flags(notes: _PlanNotes, os_name: str, train: TrainInfo, host: BuildHost) -> None:
    """The rules' extra CUDA flags for this OS and train, after any CUDAFLAGS from the environment."""
    flags: list[str] = []
    reasons: list[str] = []
    for rule_flags, reason in cuda_flags(os_name, train):
        flags.extend(rule_flags)
        reasons.append(reason)
    if flags:
        value = " ".join(flags)
        reason = "; ".join(reasons)
        if host.cudaflags:
            value = f"{host.cudaflags} {value}"
            reason += "; CUDAFLAGS kept in front (a cached CMAKE_CUDA_FLAGS would otherwise replace it)"
        notes.set_("CMAKE_CUDA_FLAGS", value, "STRING", reason)
    else:
        notes.decide("CMAKE_CUDA_FLAGS", None, f"no extra CUDA flags for CUDA {train.version} on {os_name}")


def plan(
    train: TrainInfo,
    platform: str,
    archs: ArchList,
    host: BuildHost,
    toolkit: Toolkit | None,
    cxx_standard: int | None = None,
    machine: str | None = None,
) -> CMakePlan:
    """Every decision for (train, platform, host, toolkit), each with its reason. Pure but for the rules."""
    name, os_name, platform_machine = parse_platform(platform)
    machine = normalize_machine(machine) if machine else platform_machine
    windows = os_name == "windows"
    notes = _PlanNotes()
    toolkit = _usable_toolkit(notes, toolkit, train, name, os_name)
    generator, multi, toolset = _generator(notes, os_name, host, toolkit)
    visual_studio = generator.startswith("Visual Studio")
    _build_type(notes, multi, visual_studio)
    _host_compilers(notes, windows, visual_studio, host)
    _cuda_compiler(notes, windows, visual_studio, host, toolkit)
    notes.set_(
        "CMAKE_CUDA_ARCHITECTURES",
        cmake_architectures(archs),
        "STRING",
        f"the arch table's list for {train.tag} on {machine}: every arch as SASS (-real), the newest as SASS "
        "and PTX (no suffix), as `cudaship arch-list --format cmake` spells it",
    )
    _standards(notes, train, cxx_standard)
    _cuda_flags(notes, os_name, train, host)
    suffix = ".exe" if host.os == "windows" else ""
    notes.set_("CUDASHIP_HOST_EXECUTABLE_SUFFIX", suffix, "STRING", str(_rule("host_tools", "reason")))
    return CMakePlan(
        train=train.tag,
        cuda=train.version,
        platform=name,
        os=os_name,
        machine=machine,
        generator=generator,
        toolset=toolset,
        multi_config=multi,
        entries=tuple(notes.entries),
        decisions=tuple(notes.decisions),
        toolkit=toolkit,
        warnings=tuple(notes.warnings),
    )


# ---------------------------------------------------------------------------------------------- probes

Which = Callable[[str], "str | None"]
Runner = Callable[[list[str]], "str | None"]


def probe_host(environ: Mapping[str, str] | None = None, which: Which = shutil.which) -> BuildHost:
    return BuildHost(
        os="windows" if sys.platform == "win32" else "linux",
        ninja=which("ninja"),
        clang_cl=which("clang-cl"),
        cudacxx=envvars.get("CUDACXX", environ) or None,
        cudaflags=envvars.get("CUDAFLAGS", environ) or None,
    )


def _run_nvcc(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout + proc.stderr if proc.returncode == 0 else None


def _release_of(root: Path, nvcc: Path | None, run: Runner) -> tuple[str, str, Path | None, bool]:
    """(release, how, nvcc that ran, is a cudaship toolkit) of the toolkit at ``root``."""
    manifest = root / TOOLKIT_MANIFEST
    is_cudaship = manifest.is_file()
    candidates = [nvcc] if nvcc is not None else [root / "bin" / "nvcc", root / "bin" / "nvcc.exe"]
    for candidate in candidates:
        if candidate.is_file():
            out = run([str(candidate), "--version"])
            match = _RELEASE_RE.search(out or "")
            if match:
                return f"{match.group(1)}.{match.group(2)}", "nvcc --version", candidate, is_cudaship
    if is_cudaship:
        try:
            release = str(read_json(manifest, error=UsageError)["release"])
            return ".".join(release.split(".")[:2]), TOOLKIT_MANIFEST, None, True
        except (UsageError, ValueError, KeyError, TypeError):
            pass
    version_json = root / "version.json"
    if version_json.is_file():
        try:
            release = str(read_json(version_json, error=UsageError)["cuda"]["version"])
            return ".".join(release.split(".")[:2]), "version.json", None, False
        except (UsageError, ValueError, KeyError, TypeError):
            pass
    cuda_h = root / "include" / "cuda.h"
    if cuda_h.is_file():
        match = _CUDA_H_RE.search(cuda_h.read_text(encoding="utf-8", errors="replace"))
        if match:
            number = int(match.group(1))
            return f"{number // 1000}.{number % 1000 // 10}", "cuda.h", None, False
    raise ToolkitError(
        "cannot tell the CUDA release: no runnable bin/nvcc, version.json or include/cuda.h", path=str(root)
    )


def _root_of_nvcc(nvcc: Path, run: Runner) -> Path:
    """The toolkit root of an nvcc found on PATH (through wrappers: nvcc's own TOP, else ../)."""
    out = run([str(nvcc), "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull]) or ""
    for line in out.splitlines():
        match = re.match(r"#\$ TOP=(.+)$", line.strip())
        if match:
            return Path(os.path.normpath(match.group(1)))
    return nvcc.resolve().parent.parent


def locate_toolkit(
    explicit: Path | None,
    environ: Mapping[str, str] | None = None,
    which: Which = shutil.which,
    run: Runner = _run_nvcc,
) -> Toolkit:
    """The toolkit from ``--toolkit``, ``$CUDASHIP_TOOLKIT`` (a ``cudaship toolkit`` directory),
    ``$CUDA_HOME`` / ``$CUDA_PATH``, or nvcc on PATH, in that order, with the release of its nvcc."""
    choices: list[tuple[str, Path]] = []
    if explicit is not None:
        choices.append(("--toolkit", explicit))
    ours = envvars.get("CUDASHIP_TOOLKIT", environ)  # validated: a file is not a toolkit directory
    if ours:
        choices.append(("CUDASHIP_TOOLKIT", Path(ours)))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = envvars.get(var, environ)
        if value:
            choices.append((var, Path(value)))
    if choices:
        source, root = choices[0]
        if not root.is_dir():
            raise ToolkitError(f"the CUDA toolkit from {source} is not a directory", path=str(root))
        if source == "CUDASHIP_TOOLKIT" and not (root / TOOLKIT_MANIFEST).is_file():
            raise ToolkitError(
                f"CUDASHIP_TOOLKIT is not a cudaship toolkit (no {TOOLKIT_MANIFEST})", path=str(root)
            )
        release, how, nvcc, is_cudaship = _release_of(root, None, run)
        return Toolkit(root, source, nvcc, release, how, is_cudaship)
    found = which("nvcc")
    if not found:
        raise ToolkitError(
            "no CUDA toolkit found: pass --toolkit DIR, set CUDA_HOME or CUDA_PATH, or put nvcc on PATH"
        )
    nvcc = Path(found)
    root = _root_of_nvcc(nvcc, run)
    release, how, ran, is_cudaship = _release_of(root, nvcc, run)
    return Toolkit(root, "PATH", ran, release, how, is_cudaship)


def check_toolkit(toolkit: Toolkit, train: TrainInfo) -> None:
    """The toolkit's release must be the train's (13.0 for cu130)."""
    if toolkit.release != train.version:
        raise ToolkitError(
            f"the CUDA toolkit from {toolkit.source} is CUDA {toolkit.release} ({toolkit.release_from}), "
            f"but train {train.tag} needs CUDA {train.version}",
            path=str(toolkit.root),
        )
