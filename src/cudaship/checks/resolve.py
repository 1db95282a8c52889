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
from dataclasses import dataclass, replace
from enum import Enum

from packaging.utils import canonicalize_name

from cudaship.checks import nvidia
from cudaship.checks.context import AuditContext
from cudaship.checks.policy import name_match
from cudaship.checks.providers import WheelProviders
from cudaship.checks.pyloads import preloaded_by_package
from cudaship.knowledge.hosts import Host, host_of_directory, host_of_library
from cudaship.knowledge.libraries import cudart_major
from cudaship.knowledge.program_runtimes import runtime_providing
from cudaship.knowledge.providers import builds_providing, conventions_for
from cudaship.knowledge.system_libraries import Provider, distribution_library, provider_of
from cudaship.providers.records import Provided, Reached
from cudaship.records.binary import FileFormat, Import
from cudaship.records.files import FileReport

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
    #: the SONAME of a library shipped in the wheel, off the search path: satisfied once that library is
    #: loaded (a plugin its host library loads; glibc reuses a loaded object whose SONAME matches)
    LOADED = "loaded"
    #: installed by a requirement and loaded first by the package's own Python code (ctypes.CDLL, ...)
    PACKAGE_PRELOAD = "package-preload"
    #: a library of a host package the wheel does not declare (torch): the user installs and imports it first
    HOST = "host"
    #: a library outside the manylinux policy that the distributions install by default (libgomp.so.1): the
    #: user's system provides it (knowledge/data/distribution_libraries.toml)
    DISTRIBUTION = "distribution"
    ALLOWED = "allowed"  #: the policy allows it unresolved
    UNRESOLVED = "unresolved"


@dataclass(frozen=True)
class Resolution:
    via: Via
    target: str | None = None  #: installed path for SHIPPED / REQUIREMENT
    detail: str = ""  #: one phrase explaining the result (requirement name, why not found)
    note: str | None = None  #: passes, but worth saying (an extra is needed, found at run time, ...)
    extra: str | None = None  #: the wheel's extra under which the provider is installed (None: always)
    #: what a conditional resolution depends on, shared by every import it serves: the undeclared host
    #: package, the Python file that preloads, the sibling that must be loaded first
    cause: str | None = None

    @property
    def ok(self) -> bool:
        return self.via is not Via.UNRESOLVED


def _expand(entries: tuple[str, ...], origin: str) -> list[str]:
    """ELF RPATH / RUNPATH entries as installed directories (``$ORIGIN`` is ``origin``)."""
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
    return dirs


def search_dirs(ctx: AuditContext, path: str, report: FileReport) -> tuple[str, ...]:
    """Installed directories the loader searches for ``report``'s imports (``..`` may leave site-packages),
    in order: for ELF see :func:`search_path`."""
    return tuple(dict.fromkeys(d for d, _whence in search_path(ctx, path, report)))


def search_path(ctx: AuditContext, path: str, report: FileReport) -> tuple[tuple[str, str], ...]:
    """(directory, where the loader took it from) for ``report``'s imports, in the loader's order.

    ELF, as glibc's ``_dl_map_new_object`` (elf/dl-load.c) searches: a library with DT_RUNPATH searches its
    DT_RUNPATH only (get-dynamic-info.h drops DT_RPATH when DT_RUNPATH is present); one without searches its
    own DT_RPATH, then the DT_RPATH of the object that loaded it (``l_loader``), and so on up the chain. In a
    wheel the chain is the shipped libraries that need it (:attr:`AuditContext.needed_by`), up to the module
    Python loads; an object above with DT_RUNPATH contributes nothing but the chain goes on through it. Where
    several shipped libraries need it, the directories of every chain are searched (which one loads it first
    depends on the import order), nearest first. Computed once per library."""
    found = ctx.search_paths.get(path)
    if found is None:
        found = ctx.search_paths[path] = _search_path(ctx, path, report)
    return found


def _search_path(ctx: AuditContext, path: str, report: FileReport) -> tuple[tuple[str, str], ...]:
    host = report.host
    assert host is not None
    origin = posixpath.dirname(path)
    if report.format is FileFormat.ELF:
        if host.runpath:
            return tuple((d, "DT_RUNPATH") for d in dict.fromkeys(_expand(host.runpath, origin)))
        out: dict[str, str] = {d: "DT_RPATH" for d in _expand(host.rpath, origin)}
        seen = {path}
        level = list(ctx.needed_by.get(path, ()))
        while level:  # breadth first: the nearest loader's DT_RPATH comes first
            following: list[str] = []
            for loader in level:
                if loader in seen:
                    continue
                seen.add(loader)
                above = ctx.libraries.get(loader)
                if above is None or above.host is None or above.format is not FileFormat.ELF:
                    continue
                if not above.host.runpath:
                    for d in _expand(above.host.rpath, posixpath.dirname(loader)):
                        out.setdefault(d, f"DT_RPATH of {loader}, above it in the loading chain")
                following.extend(ctx.needed_by.get(loader, ()))
            level = following
        return tuple(out.items())
    if report.format is FileFormat.PE:
        dirs = (origin, *ctx.policy.closure.runtime_dirs, *ctx.providers.dll_directories)
        return tuple((d, "search order") for d in dict.fromkeys(dirs))
    # Mach-O: @loader_path and @rpath entries
    macho = [origin]
    for entry in host.rpath:
        if entry.startswith(("@loader_path", "@executable_path")):
            rest = entry.split("/", 1)[1] if "/" in entry else ""
            macho.append(posixpath.normpath(posixpath.join(origin, rest)))
    return tuple((d, "LC_RPATH") for d in dict.fromkeys(macho))


#: Directories of a search path named in one message before the rest are counted
SHOWN_DIRS = 8


def _shown(dirs: tuple[str, ...]) -> str:
    if not dirs:
        return "none"
    more = len(dirs) - SHOWN_DIRS
    return ", ".join(dirs[:SHOWN_DIRS]) + (f" and {more} more" if more > 0 else "")


def _dir_key(directory: str, case_insensitive: bool) -> str:
    key = directory if directory == "." else posixpath.normpath(directory)
    return key.lower() if case_insensitive else key


def _positions(
    ctx: AuditContext, path: str, searched: tuple[tuple[str, str], ...], case_insensitive: bool
) -> dict[str, int]:
    """Each directory of ``path``'s search path → its first place in it; built once per library (its cost
    is the length of the search path, counted in :attr:`AuditContext.resolve_probes`)."""
    found = ctx.search_positions.get(path)
    if found is None:
        found = {}
        for i, (d, _whence) in enumerate(searched):
            ctx.resolve_probes += 1
            found.setdefault(_dir_key(d, case_insensitive), i)
        ctx.search_positions[path] = found
    return found


def _in_dir(ctx: AuditContext, directory: str, name: str, case_insensitive: bool) -> str | None:
    ctx.resolve_probes += 1
    candidate = posixpath.normpath(posixpath.join(directory, name)) if directory != "." else name
    if case_insensitive:
        for p in ctx.by_name.get(posixpath.basename(name).lower(), ()):
            if p.lower() == candidate.lower():
                return p
        return None
    return candidate if candidate in ctx.libraries else None


def _first_shipped(
    ctx: AuditContext, path: str, searched: tuple[tuple[str, str], ...], name: str, pe: bool
) -> tuple[str, str] | None:
    """The shipped library the search path finds first for ``name``, and where the loader took that
    directory from. Looked up from the name: the libraries of that base name, each placed on the search path
    by its directory (one probe each), never the product of the search path and the imports."""
    if "/" in name:  # a relative path in the import (rare): directory by directory
        for d, whence in searched:
            found = _in_dir(ctx, d, name, pe)
            if found is not None:
                return found, whence
        return None
    positions = _positions(ctx, path, searched, pe)
    best: tuple[int, str] | None = None
    for p in ctx.by_name.get(name.lower(), ()):
        ctx.resolve_probes += 1
        if not pe and posixpath.basename(p) != name:
            continue
        i = positions.get(_dir_key(posixpath.dirname(p) or ".", pe))
        if i is not None and (best is None or i < best[0]):
            best = (i, p)
    return None if best is None else (best[1], searched[best[0]][1])


def _first_provided(
    ctx: AuditContext, path: str, searched: tuple[tuple[str, str], ...], name: str, pe: bool
) -> tuple[Provided, str] | None:
    """The file a requirement installs that the search path finds first for ``name`` (as
    :func:`_first_shipped`: by name, one probe per installed file of that name)."""
    providers = ctx.providers
    if "/" in name:
        for d, whence in searched:
            ctx.resolve_probes += 1
            provided = _provided_in(providers, d, name, pe)
            if provided is not None:
                return provided, whence
        return None
    positions = _positions(ctx, path, searched, pe)
    best: tuple[int, Provided] | None = None
    for p in providers.by_name.get(name.lower(), ()):
        ctx.resolve_probes += 1
        if not pe and posixpath.basename(p.path) != name:
            continue
        i = positions.get(_dir_key(posixpath.dirname(p.path) or ".", pe))
        if i is not None and (best is None or i < best[0]):
            best = (i, p)
    if best is None:
        return None
    i, provided = best
    if not pe:  # the one always installed before an extra's, as the loader's file would be
        provided = providers.installed(provided.path) or provided
    return provided, searched[i][1]


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
    searched = search_path(ctx, path, report)
    dirs = tuple(d for d, _whence in searched)
    shipped = _first_shipped(ctx, path, searched, name, pe)
    if shipped is not None:
        found, whence = shipped
        inherited = f", through the {whence}" if whence.startswith("DT_RPATH of ") else ""
        return Resolution(Via.SHIPPED, found, f"shipped at {found}{inherited}")
    providers = ctx.providers
    provided_at = _first_provided(ctx, path, searched, name, pe)
    if provided_at is not None:
        provided, whence = provided_at
        res = _from_requirement(ctx, name, provided)
        if whence.startswith("DT_RPATH of "):
            res = replace(res, detail=f"{res.detail}, through the {whence}")
        return res
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
    # 4b. a library of a host package the wheel does not declare (torch): its users import the host first
    host = _undeclared_host(ctx, name, searched, platform)
    if host is not None:
        return host
    # 4c. the SONAME of a library shipped in the wheel, off the search path: already loaded by then
    loaded = _loaded_sibling(ctx, path, report, name)
    if loaded is not None:
        return loaded
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
        # One cause on every OS: the build `pip install` brings lacks the library, another build of the same
        # project has it. The verdict follows what the brought build is, and each message says why the other
        # case differs: a CPU build (torch on PyPI for Windows) sends every CUDA user to another build anyway,
        # so needing one is the documented install (a note); a CUDA build of another major (torch on PyPI
        # for Linux) is the build the wheel's own requirements install, which cannot load it (an error).
        if not own_build and other_cuda is not None and other_cuda != build.cuda:
            # a real mismatch, unless this library is the variant chosen for a CUDA {build.cuda} torch
            return Resolution(
                Via.UNRESOLVED,
                None,
                f"{found} is a CUDA {other_cuda} build; {name} comes with {build.note} (an error because "
                f"`pip install` brings that CUDA {other_cuda} build; where the index's {r.dist.name} is a "
                "CPU build, as on Windows, every CUDA user installs another build anyway and the same "
                "import passes with a note)",
            )
        note = f"provided by {build.note}, not by {found}"
        if not own_build and other_cuda is None:
            note += (
                f", a CPU build: every CUDA user of {r.dist.name} installs another build anyway (where the "
                f"index's {r.dist.name} is a CUDA build of another major, as on Linux, the same import is an "
                "error: `pip install` brings a build without it)"
            )
        return Resolution(
            Via.BUILD, None, f"{name} ← {r.dist.name} (CUDA {build.cuda} build) via {r.via}", note
        )
    # 6b. installed by a requirement and loaded first by the package's own Python code
    preload = _package_preload(ctx, name, anywhere, pe)
    if preload is not None:
        return preload
    # 7. the importing library is loaded only on demand
    what = providers.on_demand(path)
    if what is not None:
        return Resolution(Via.ON_DEMAND, None, f"{path} is loaded only by {what}", f"needed only by {what}")
    # 8. not found: say why, as precisely as possible
    shipped_elsewhere = ctx.by_name.get(posixpath.basename(name).lower(), [])
    where = _shown(dirs)
    if shipped_elsewhere:
        added = preloaded_by_package(ctx, name, shipped_elsewhere[0], pe)
        if added is not None:  # a vendored directory the package's code adds (delvewheel's patch)
            where_py, mechanism = added
            note = f"preloaded by the package's Python code ({where_py}: {mechanism})"
            return Resolution(
                Via.PACKAGE_PRELOAD,
                shipped_elsewhere[0],
                f"{name} shipped at {shipped_elsewhere[0]}, off the search path, {note}",
                note,
                cause=where_py,
            )
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
    # 9. a distribution library outside the manylinux policy: the user's system provides it, or not
    distro = distribution_library(name) if platform == "linux" else None
    if distro is not None and distro.default:
        return Resolution(
            Via.DISTRIBUTION,
            None,
            f"a distribution library outside the manylinux policy: needs the system package "
            f"{distro.packages} ({distro.why})",
            cause=f"{posixpath.basename(name)} from {distro.debian} / {distro.rhel}",
        )
    if distro is not None:
        return Resolution(
            Via.UNRESOLVED,
            None,
            f"not shipped: a distribution library outside the manylinux policy that is not installed by "
            f"default ({distro.why}): needs the system package {distro.packages}, which the wheel cannot "
            f"declare (searched: {where})",
        )
    return Resolution(
        Via.UNRESOLVED,
        None,
        f"not shipped, not a system library, no requirement provides it (searched: {where})",
    )


def _declared_projects(ctx: AuditContext) -> set[str]:
    names: set[str] = {canonicalize_name(r.name) for r in ctx.declared}
    names.update(canonicalize_name(r.dist.name) for r in ctx.providers.closure.reached)
    return names


def undeclared_hosts(ctx: AuditContext) -> tuple[Host, ...]:
    """Host packages (knowledge/data/hosts.toml) the wheel's libraries need, by a library's name or a RUNPATH
    entry into the host's directory, that the wheel does not declare: its users install and import them
    first (torch). Computed once per wheel."""
    if ctx.undeclared_hosts is not None:
        return ctx.undeclared_hosts
    own = canonicalize_name(ctx.scan.dist.metadata.name or "")
    declared = _declared_projects(ctx) | {own}  # a host's own wheel does not depend on itself
    found: dict[str, Host] = {}
    for path, report in sorted(ctx.libraries.items()):
        assert report.host is not None
        candidates = [host_of_library(i.library, own) for i in report.host.imports]
        if report.format is FileFormat.ELF:
            candidates += [host_of_directory(d, own) for d in search_dirs(ctx, path, report)]
        for h in candidates:
            if h is not None and canonicalize_name(h.project) not in declared:
                found.setdefault(h.project, h)
    hosts = tuple(found.values())
    ctx.undeclared_hosts = hosts
    return hosts


def _undeclared_host(
    ctx: AuditContext, name: str, searched: tuple[tuple[str, str], ...], platform: str
) -> Resolution | None:
    """A library of a host package the wheel does not declare, or one that host's builds bring and load
    first (torch's CUDA libraries): a warning naming the mechanism (class 4 of issue 21), never a pass nor
    an error."""
    hosts = undeclared_hosts(ctx)
    if not hosts:
        return None
    base = posixpath.basename(name)
    for host in hosts:
        if not host.owns_library(name):
            continue
        ctx.host_packages.add(canonicalize_name(host.project))
        for d, whence in searched:
            if host.owns_directory(d):
                mechanism = f"{whence} entry {d} points into {host.project}'s directory"
                break
        else:
            mechanism = (
                f"{base} is {host.project}'s library, matched by name once `import {host.module}` loaded it"
            )
        return _host_resolution(host, mechanism)
    for host in hosts:
        build = builds_providing(host.project, base, platform)
        if build is None:
            continue
        ctx.host_packages.add(canonicalize_name(host.project))
        mechanism = f"{base} comes with {build.note}, loaded by `import {host.module}` first"
        return _host_resolution(host, mechanism)
    return None


def _host_resolution(host: Host, mechanism: str) -> Resolution:
    return Resolution(
        Via.HOST,
        None,
        f"depends on {host.project}, not declared: {mechanism}; users must install {host.project} first "
        f"(and import {host.module} before this package)",
        f"depends on {host.project}, not declared",
        cause=canonicalize_name(host.project),
    )


def is_extension_module(path: str, report: FileReport) -> bool:
    """A Python extension module (what ``import`` loads): ``PyInit_<name>`` exported, or an extension
    suffix (``.cpython-312-x86_64-linux-gnu.so``, ``.abi3.so``, ``.pyd``)."""
    base = posixpath.basename(path)
    stem = base.split(".", 1)[0]
    host = report.host
    if host is not None and f"PyInit_{stem}" in host.exports:
        return True
    lowered = base.lower()
    return lowered.endswith(".pyd") or ".cpython-" in lowered or lowered.endswith(".abi3.so")


def _loaded_sibling(ctx: AuditContext, path: str, report: FileReport, name: str) -> Resolution | None:
    """An import naming the SONAME of a library shipped in the same wheel, which the search path does not
    reach (class 3 of issue 21). glibc first looks for an already loaded object of that name
    (``_dl_lookup_map``); so the import is satisfied when that library is loaded before the importer.

    The rule: a plugin, a library that no shipped library needs and whose name a shipped library stores for
    dlopen (its host loads it, so the host is loaded by then), is satisfied. Any other library that no
    shipped library needs (a Python extension module, a library the package's code loads) is satisfied
    only when something loaded the library first, which the import order decides: a warning naming that.
    A library that is itself needed by another (loaded as part of a chain) gets no such benefit: the loader
    searches for the name then, and fails (unless an RPATH up the chain reaches it)."""
    if report.format is not FileFormat.ELF or ctx.needed_by.get(path):
        return None
    targets = [t for t in ctx.by_soname.get(posixpath.basename(name).lower(), ()) if t != path]
    if not targets:
        return None
    target = targets[0]
    own = posixpath.basename(path)
    loaders = [
        p
        for p, r in sorted(ctx.libraries.items())
        if p != path
        and r.host is not None
        and own in {posixpath.basename(n) for n in r.host.embedded_library_names}
    ]
    if loaders:
        return Resolution(
            Via.LOADED,
            target,
            f"the SONAME of {target}, shipped in the wheel: {own} is a plugin {loaders[0]} loads by name "
            f"(dlopen), so {posixpath.basename(target)} is loaded by then (glibc reuses the loaded object of "
            "that SONAME)",
        )
    what = "a Python module" if is_extension_module(path, report) else "loaded by no shipped library"
    return Resolution(
        Via.LOADED,
        target,
        f"the SONAME of {target}, shipped in the wheel but not on the search path of {own} ({what}): "
        f"satisfied only when {target} is already loaded when {own} is loaded",
        "loaded first",
        cause=target,
    )


def _package_preload(ctx: AuditContext, name: str, provided: Provided | None, pe: bool) -> Resolution | None:
    """Installed by a declared requirement and loaded first by the package's own Python code (class 1 of
    issue 21): ``ctypes.CDLL`` by name or glob, a helper loading that directory, ``os.add_dll_directory``."""
    if provided is None:
        return None
    found = preloaded_by_package(ctx, name, provided.path, pe, provided.reached)
    if found is None:
        return None
    where, mechanism = found
    note = f"preloaded by the package's Python code ({where}: {mechanism})"
    if provided.reached.extra:
        note = f"provided when installed as {_own(ctx)}[{provided.reached.extra}]; {note}"
    return Resolution(
        Via.PACKAGE_PRELOAD,
        provided.path,
        f"{name} ← {provided.reached.label()} at {provided.path}, {note}",
        note,
        provided.reached.extra,
        cause=where,
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
