"""Where each import of a shipped library is found once the wheel is installed.

ELF: through the library's RUNPATH (or RPATH when it has no RUNPATH), ``$ORIGIN`` being its installed
directory; a name with a ``/`` is a path. PE: the DLL's own directory, then the directories the policy says
are
added at run time (``os.add_dll_directory``). Mach-O: ``@loader_path`` / ``@rpath``. A directory can hold a
shipped file, or a file a declared requirement installs (NVIDIA's wheels install into known directories).
Names no search finds may still be the NVIDIA driver, the interpreter or an operating-system library.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from enum import Enum

from cudaship.binary.records import FileFormat, Import
from cudaship.checks import nvidia
from cudaship.checks.context import AuditContext
from cudaship.checks.policy import name_match
from cudaship.inspection.records import FileReport
from cudaship.knowledge.program_runtimes import runtime_providing
from cudaship.knowledge.system_libraries import Provider, provider_of

_BINARY_OS = {FileFormat.PE: "windows", FileFormat.ELF: "linux", FileFormat.MACHO: "macos"}


class Via(str, Enum):
    SHIPPED = "shipped"
    REQUIREMENT = "requirement"
    DRIVER = "driver"
    SYSTEM = "system"
    PYTHON = "python"
    RUNTIME = "runtime"  #: a program's import that the runtime loading it provides (torch's libtorch_cpu.so)
    ALLOWED = "allowed"  #: the policy allows it unresolved
    UNRESOLVED = "unresolved"


@dataclass(frozen=True)
class Resolution:
    via: Via
    target: str | None = None  #: installed path for SHIPPED / REQUIREMENT
    detail: str = ""  #: one phrase explaining the result (requirement name, why not found)

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
        return tuple(dict.fromkeys((origin, *ctx.policy.closure.runtime_dirs)))
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
    for d in dirs:
        req = nvidia.installed_by(ctx, d, name)
        if req is not None:
            return Resolution(Via.REQUIREMENT, posixpath.join(d, name), f"installed at {d} by {req}")
    # 3. the driver, the interpreter, the operating system, the policy's allow list
    provider = provider_of(name, platform, ctx.policy.closure.system_libraries)
    if provider is Provider.DRIVER:
        return Resolution(Via.DRIVER, None, "NVIDIA driver")
    if provider is not None:
        return Resolution(Via(provider.value), None, f"{provider.value} library")
    if ctx.is_program:
        runtime = runtime_providing(ctx.scan.kind.value, posixpath.basename(name), platform)
        if runtime is not None:
            return Resolution(Via.RUNTIME, None, f"loaded by {runtime}, the runtime that loads the program")
    allowed = name_match(ctx.policy.closure.allow, name)
    if allowed is not None:
        return Resolution(Via.ALLOWED, None, f"allowed by policy ({allowed})")
    # 4. not found: say why, as precisely as possible
    shipped_elsewhere = ctx.by_name.get(posixpath.basename(name).lower(), [])
    where = ", ".join(dirs) if dirs else "none"
    if shipped_elsewhere:
        return Resolution(
            Via.UNRESOLVED,
            None,
            f"shipped at {shipped_elsewhere[0]} but not on the search path (searched: {where})",
        )
    hint = nvidia.requirement_hint(ctx, name)
    if hint:
        return Resolution(Via.UNRESOLVED, None, f"{hint}; searched: {where}")
    return Resolution(
        Via.UNRESOLVED, None, f"not shipped, not a system library, not declared (searched: {where})"
    )


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
