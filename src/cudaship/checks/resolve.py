"""Where each import of a shipped library is found once the wheel is installed with its requirements.

ELF: through the library's RUNPATH (or RPATH when it has no RUNPATH), ``$ORIGIN`` being its installed
directory; a name with a ``/`` is a path. PE: the DLL's own directory, then the directories the policy says
are added at run time and those a requirement's import adds (``os.add_dll_directory``: torch/lib). Mach-O:
``@loader_path`` / ``@rpath``. A directory can hold a shipped file, or a file a declared requirement installs
(the closure of :mod:`cudaship.checks.providers`), possibly only under an extra (then it passes with a note).

Then, in order: the NVIDIA driver, the interpreter, the operating system, the policy's allow list; a library
a required package loads on import before ours (torch preloads its libraries and their CUDA dependencies;
the loader reuses a loaded library of the same soname / DLL name); a library the package finds at run time
by name (cuda-pathfinder, ``onnxruntime.preload_dlls()``) that a requirement installs; a library of a build
of a requirement other than the index's (torch's CUDA builds); a library loaded only on demand.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from enum import Enum

from cudaship.binary.records import FileFormat, Import
from cudaship.checks import nvidia
from cudaship.checks.context import AuditContext
from cudaship.checks.policy import name_match
from cudaship.checks.providers import WheelProviders
from cudaship.inspection.records import FileReport
from cudaship.knowledge.libraries import cudart_major
from cudaship.knowledge.program_runtimes import runtime_providing
from cudaship.knowledge.providers import builds_providing, conventions_for
from cudaship.knowledge.system_libraries import Provider, provider_of
from cudaship.providers.records import Provided, Reached

_BINARY_OS = {FileFormat.PE: "windows", FileFormat.ELF: "linux", FileFormat.MACHO: "macos"}


class Via(str, Enum):
    SHIPPED = "shipped"
    REQUIREMENT = "requirement"
    OPTIONAL = "optional"  #: installed by a requirement under one of the wheel's extras
    PRELOADED = "preloaded"  #: loaded on import of a required package (torch) before ours
    RUNTIME = (
        "runtime"  #: found at run time by name (cuda-pathfinder, preload_dlls), a requirement installs it
    )
    BUILD = "build"  #: installed by another build of a requirement (torch's CUDA builds)
    ON_DEMAND = "on-demand"  #: the importing library itself is loaded only when a feature is used
    DRIVER = "driver"
    SYSTEM = "system"
    PYTHON = "python"
    #: a program's import that the runtime loading it provides (torch's libtorch_cpu.so)
    PROGRAM_RUNTIME = "program-runtime"
    ALLOWED = "allowed"  #: the policy allows it unresolved
    UNRESOLVED = "unresolved"


@dataclass(frozen=True)
class Resolution:
    via: Via
    target: str | None = None  #: installed path for SHIPPED / REQUIREMENT
    detail: str = ""  #: one phrase explaining the result (requirement name, why not found)
    note: str | None = None  #: passes, but worth saying (an extra is needed, found at run time, ...)
    extra: str | None = None  #: the wheel's extra under which the provider is installed (None: always)

    @property
    def ok(self) -> bool:
        return self.via is not Via.UNRESOLVED


def search_dirs(ctx: AuditContext, path: str, report: FileReport) -> tuple[str, ...]:
    """Installed directories the loader searches for ``report``'s imports (``..`` may leave site-packages)."""
    host = report.host
    assert host is not None
    origin = posixpath.dirname(path)
    if report.format is FileFormat.ELF:
        entries = host.runpath if host.runpath else host.rpath
        dirs: list[str] = []
        for entry in entries:
            for raw in entry.split(":"):
                if not raw:
                    continue
                d = raw.replace("${ORIGIN}", "$ORIGIN")
                if d.startswith("$ORIGIN"):
                    dirs.append(posixpath.normpath(posixpath.join(origin, d[len("$ORIGIN") :].lstrip("/"))))
                else:
                    dirs.append("/" + d.lstrip("/") if d.startswith("/") else d)
        return tuple(dict.fromkeys(dirs))
    if report.format is FileFormat.PE:
        return tuple(
            dict.fromkeys((origin, *ctx.policy.closure.runtime_dirs, *ctx.providers.dll_directories))
        )
    # Mach-O: @loader_path and @rpath entries
    dirs = [origin]
    for entry in host.rpath:
        if entry.startswith(("@loader_path", "@executable_path")):
            rest = entry.split("/", 1)[1] if "/" in entry else ""
            dirs.append(posixpath.normpath(posixpath.join(origin, rest)))
    return tuple(dict.fromkeys(dirs))


def _in_dir(ctx: AuditContext, directory: str, name: str, case_insensitive: bool) -> str | None:
    candidate = posixpath.normpath(posixpath.join(directory, name)) if directory != "." else name
    if case_insensitive:
        for p in ctx.by_name.get(posixpath.basename(name).lower(), ()):
            if p.lower() == candidate.lower():
                return p
        return None
    return candidate if candidate in ctx.libraries else None


def resolve(ctx: AuditContext, path: str, report: FileReport, imp: Import) -> Resolution:
    """Resolve one import of the shipped library at ``path``."""
    name = imp.library
    pe = report.format is FileFormat.PE
    # system libraries are those of the binary's own OS (a Windows DLL inside a Linux wheel is still a DLL)
    platform = _BINARY_OS.get(report.format, ctx.os) if report.format is not None else ctx.os
    if report.format is FileFormat.MACHO:
        name = _macho_name(name)
    # 1. a path written into the import
    if "/" in name and report.format is FileFormat.ELF:
        base = posixpath.basename(name)
        provider = provider_of(base, platform, ctx.policy.closure.system_libraries)
        if provider is not None:
            return Resolution(Via(provider.value), None, f"{provider.value} library")
        return Resolution(Via.UNRESOLVED, None, f"absolute path {name} outside the wheel")
    # 2. the search path: shipped files, then files a requirement installs there
    dirs = search_dirs(ctx, path, report)
    for d in dirs:
        found = _in_dir(ctx, d, name, pe)
        if found is not None:
            return Resolution(Via.SHIPPED, found, f"shipped at {found}")
    providers = ctx.providers
    for d in dirs:
        provided = _provided_in(providers, d, name, pe)
        if provided is not None:
            return _from_requirement(ctx, name, provided)
    # 3. the driver, the interpreter, the operating system, the policy's allow list
    provider = provider_of(name, platform, ctx.policy.closure.system_libraries)
    if provider is Provider.DRIVER:
        return Resolution(Via.DRIVER, None, "NVIDIA driver")
    if provider is not None:
        return Resolution(Via(provider.value), None, f"{provider.value} library")
    if ctx.is_program:
        runtime = runtime_providing(ctx.scan.kind.value, posixpath.basename(name), platform)
        if runtime is not None:
            return Resolution(
                Via.PROGRAM_RUNTIME, None, f"loaded by {runtime}, the runtime that loads the program"
            )
    allowed = name_match(ctx.policy.closure.allow, name)
    if allowed is not None:
        return Resolution(Via.ALLOWED, None, f"allowed by policy ({allowed})")
    # 4. loaded before ours by a required package's import
    base = posixpath.basename(name).lower()
    pre = providers.preloaded.get(base)
    if pre is not None:
        file, loader = pre
        who = f"{file.reached.label()}" if file.reached is not loader else loader.label()
        note = f"provided when installed as {_own(ctx)}[{loader.extra}]" if loader.extra else None
        return Resolution(
            Via.PRELOADED,
            file.path,
            f"{name} ← {who}, loaded by `import {loader.dist.name}` first ({file.path})",
            note,
            loader.extra,
        )
    # 5. found at run time by name wherever a requirement installs it
    lookup = providers.runtime_lookup
    anywhere = providers.named(name)
    if lookup is not None and anywhere is not None:
        note = f"found at run time by {lookup}"
        if anywhere.reached.extra:
            note = f"provided when installed as {_own(ctx)}[{anywhere.reached.extra}]; {note}"
        return Resolution(
            Via.RUNTIME,
            anywhere.path,
            f"{name} ← {anywhere.reached.label()} at {anywhere.path}",
            note,
            anywhere.reached.extra,
        )
    # 6. another build of a requirement that is loaded first (torch's CUDA builds)
    for r in providers.closure.reached:
        if not any(c.preloads for c in conventions_for(r.dist.name)):
            continue
        build = builds_providing(r.dist.name, posixpath.basename(name), platform)
        if build is None:
            continue
        found = f"{r.dist.name} {r.dist.version} from {_source_kind(r)}"
        variant = ctx.variants.get(path)
        own_build = variant is not None and variant.train is not None and variant.train.major == build.cuda
        other_cuda = _cuda_build_of(providers, r)
        if not own_build and other_cuda is not None and other_cuda != build.cuda:
            # `pip install` brings a CUDA build of another major: a real mismatch, unless this library is the
            # variant chosen for a CUDA {build.cuda} torch
            return Resolution(
                Via.UNRESOLVED,
                None,
                f"{found} is a CUDA {other_cuda} build; {name} comes with {build.note}",
            )
        note = f"provided by {build.note}, not by {found}"
        return Resolution(
            Via.BUILD, None, f"{name} ← {r.dist.name} (CUDA {build.cuda} build) via {r.via}", note
        )
    # 7. the importing library is loaded only on demand
    what = providers.on_demand(path)
    if what is not None:
        return Resolution(Via.ON_DEMAND, None, f"{path} is loaded only by {what}", f"needed only by {what}")
    # 8. not found: say why, as precisely as possible
    shipped_elsewhere = ctx.by_name.get(posixpath.basename(name).lower(), [])
    where = ", ".join(dirs) if dirs else "none"
    if shipped_elsewhere:
        return Resolution(
            Via.UNRESOLVED,
            None,
            f"shipped at {shipped_elsewhere[0]} but not on the search path (searched: {where})",
        )
    if anywhere is not None:
        return Resolution(
            Via.UNRESOLVED,
            None,
            f"{anywhere.reached.label()} installs it at {anywhere.path}, which the search path does not "
            f"reach (searched: {where})",
        )
    hint = nvidia.requirement_hint(ctx, name)
    if hint:
        return Resolution(Via.UNRESOLVED, None, f"{hint}; searched: {where}")
    return Resolution(
        Via.UNRESOLVED,
        None,
        f"not shipped, not a system library, no requirement provides it (searched: {where})",
    )


def _own(ctx: AuditContext) -> str:
    return ctx.scan.dist.metadata.name


def _cuda_build_of(providers: WheelProviders, r: Reached) -> int | None:
    """The CUDA major of the build of ``r`` that ``pip install`` brings: the CUDA runtime among its files or
    those of what it requires (torch's Linux builds require nvidia-cuda-runtime); None for a CPU build."""
    for other in providers.closure.reached:
        if other.chain[: len(r.chain)] != r.chain:
            continue
        for f in other.dist.files:
            major = cudart_major(posixpath.basename(f))
            if major is not None:
                return major
    return None


def _source_kind(r: Reached) -> str:
    return r.dist.source.split(" ", 1)[0]


def _provided_in(
    providers: WheelProviders, directory: str, name: str, case_insensitive: bool
) -> Provided | None:
    candidate = posixpath.normpath(posixpath.join(directory, name)) if directory != "." else name
    if not case_insensitive:
        return providers.installed(candidate)
    for p in providers.by_name.get(posixpath.basename(name).lower(), ()):
        if p.path.lower() == candidate.lower():
            return p
    return None


def _from_requirement(ctx: AuditContext, name: str, provided: Provided) -> Resolution:
    reached = provided.reached
    detail = f"{name} ← {reached.label()} at {provided.path}"
    if reached.extra:
        note = f"provided when installed as {_own(ctx)}[{reached.extra}]"
        return Resolution(Via.OPTIONAL, provided.path, detail, note, reached.extra)
    return Resolution(Via.REQUIREMENT, provided.path, detail)


def _macho_name(name: str) -> str:
    for prefix in ("@rpath/", "@loader_path/", "@executable_path/"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def shipped_dependencies(ctx: AuditContext, path: str) -> tuple[tuple[Import, str], ...]:
    """Imports of ``path`` that resolve to shipped libraries, with the installed path of each."""
    report = ctx.libraries.get(path)
    if report is None or report.host is None:
        return ()
    out = []
    for imp in report.host.imports:
        res = resolve(ctx, path, report, imp)
        if res.via is Via.SHIPPED and res.target is not None:
            out.append((imp, res.target))
    return tuple(out)
