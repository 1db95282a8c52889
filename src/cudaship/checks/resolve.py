"""Where each import of a shipped library is found once the wheel is installed with its requirements.

The search path is the loader's, from the one model of it (:mod:`cudaship.analysis.loader`): ELF, the
library's RUNPATH (or RPATH when it has no RUNPATH, and the RPATH inherited from the shipped libraries that
load it), ``$ORIGIN`` being its installed directory; a name with a ``/`` is a path. PE: the DLL's own
directory, then the directories the policy says are added at run time and those a requirement's import adds
(``os.add_dll_directory``: torch/lib). Mach-O: ``@loader_path`` / ``@rpath``. What this module adds is the
wheel's side: a directory can hold a shipped file, or a file a declared requirement installs (the closure of
:mod:`cudaship.checks.providers`), possibly only under an extra (then it passes with a note).

Then, in order: the NVIDIA driver, the interpreter, the operating system, the policy's allow list; a library
a required package loads on import before ours (torch preloads its libraries and their CUDA dependencies;
the loader reuses a loaded library of the same soname / DLL name); a library the package finds at run time
by name (cuda-pathfinder, ``onnxruntime.preload_dlls()``) that a requirement installs; a library of a build
of a requirement other than the index's (torch's CUDA builds); a library loaded only on demand.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum

from packaging.utils import canonicalize_name

from cudaship.analysis.loader import (
    ALREADY_LOADED,
    How,
    Requester,
    WindowsLoader,
    dyld_reuses,
    is_extension_module,
    macho_dirs,
    macho_name,
    object_dirs,
    package_dll_dirs,
    rpath_chain,
)
from cudaship.checks import nvidia
from cudaship.checks.context import AuditContext, canonical_imports
from cudaship.checks.nvidia import extra_providing
from cudaship.checks.policy import name_match
from cudaship.checks.providers import WheelProviders
from cudaship.checks.pyloads import dll_directory_computed, loaded_by_computed_name, preloaded_by_package
from cudaship.knowledge.hosts import Host, host_of_directory, host_of_library
from cudaship.knowledge.libraries import cudart_major, identify
from cudaship.knowledge.program_runtimes import runtime_providing
from cudaship.knowledge.providers import Build, builds_providing, conventions_for
from cudaship.knowledge.system_libraries import (
    Provider,
    distribution_library,
    distribution_stems,
    family_member,
    linux_policy,
    provider_of,
)
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
    #: installed by a requirement off the search path, where the package's own code builds library paths at
    #: run time (importlib.metadata into an environment variable its native code loads): uncertain
    COMPUTED = "computed"
    ALLOWED = "allowed"  #: the policy allows it unresolved
    UNRESOLVED = "unresolved"


def via_counts(vias: Iterable[Via], phrase: Callable[[int, Via], str] | None = None) -> str:
    """``1 driver, 2 system``: how many imports resolve each way, in the canonical order of the kinds (the
    order :class:`Via` declares them, docs/json-schema.md), whatever order the binary lists its imports in;
    empty for none. ``phrase`` words one count (default: the number and the kind's value)."""
    counts = Counter(vias)
    word = phrase or (lambda n, via: f"{n} {via.value}")
    return ", ".join(word(counts[via], via) for via in Via if counts[via])


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
    #: the static model cannot compute the answer: the package's own code builds the path at run time
    #: (:mod:`cudaship.checks.judgement`: a warning naming ``audit --load``, never an error)
    uncertain: bool = False
    #: the target is shipped in the wheel (a COMPUTED path to the package's own library), not a requirement's
    own: bool = False
    #: why the importing library is itself optional (loaded by name at run time, for a feature, or off the
    #: import path with what it needs behind an extra): an unmet need of it is a note naming how to get it
    optional: str | None = None

    @property
    def ok(self) -> bool:
        return self.via is not Via.UNRESOLVED


def search_dirs(ctx: AuditContext, path: str, report: FileReport) -> tuple[str, ...]:
    """Installed directories the loader searches for ``report``'s imports (``..`` may leave site-packages),
    in order: for ELF see :func:`search_path`."""
    return tuple(dict.fromkeys(d for d, _whence in search_path(ctx, path, report)))


def search_path(ctx: AuditContext, path: str, report: FileReport) -> tuple[tuple[str, str], ...]:
    """(directory, where the loader took it from) for ``report``'s imports, in the loader's order: the
    directories the objects themselves name (:func:`cudaship.analysis.loader.object_dirs`), once the wheel is
    installed; nothing of the user's process (``LD_LIBRARY_PATH``, the cache, System32: the system
    libraries are known by name).

    ELF: a library with DT_RUNPATH searches its DT_RUNPATH only; one without searches its own DT_RPATH, then
    the DT_RPATH of the objects that load it. In a wheel those are the shipped libraries that need it
    (:attr:`AuditContext.needed_by`), up to the module Python loads; where several shipped libraries need it,
    the directories of every chain are searched, nearest first (:func:`cudaship.analysis.loader.rpath_chain`).
    PE: the safe DLL search's directories before System32, those the policy and the requirements add
    (``os.add_dll_directory``) counted as added. Mach-O: ``@loader_path`` and ``LC_RPATH``. Computed once per
    library."""
    found = ctx.search_paths.get(path)
    if found is None:
        found = ctx.search_paths[path] = _search_path(ctx, path, report)
    return found


def _dynamic_of(ctx: AuditContext, loader: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    above = ctx.libraries.get(loader)
    if above is None or above.host is None or above.format is not FileFormat.ELF:
        return None
    return above.host.rpath, above.host.runpath


def _search_path(ctx: AuditContext, path: str, report: FileReport) -> tuple[tuple[str, str], ...]:
    host = report.host
    assert host is not None
    if report.format is FileFormat.ELF:
        chain = (
            ()
            if host.runpath
            else rpath_chain(path, lambda p: ctx.needed_by.get(p, ()), lambda p: _dynamic_of(ctx, p))
        )
        requester = Requester(path, host.rpath, host.runpath, chain)
        return tuple((d, _whence(how, by)) for d, how, by in object_dirs(requester))
    if report.format is FileFormat.PE:
        added = (*ctx.policy.closure.runtime_dirs, *ctx.providers.dll_directories)
        dirs = package_dll_dirs(path, WindowsLoader(dll_directories=added))
        return tuple((d, "search order") for d in dirs)
    return tuple((d, "LC_RPATH") for d in macho_dirs(path, host.rpath))


def _whence(how: How, by: str | None) -> str:
    """Where the loader took a directory from, as a message says it."""
    return f"{how.value} of {by}, above it in the loading chain" if by is not None else how.value


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
    # shipped files, then the links the wheel makes at install time (wheel-axle-runtime): a link is the file
    # it names, found where the link is
    for p in (*ctx.by_name.get(name.lower(), ()), *ctx.linked_by_name.get(name.lower(), ())):
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


@dataclass(frozen=True)
class _Lookup:
    """One import being resolved, with what every step asks of it."""

    path: str  #: the importing shipped library
    report: FileReport
    name: str  #: the import as the loader searches for it (a Mach-O install name without its prefix)
    written: str  #: the import as the binary writes it (``@rpath/libfoo.dylib``)
    pe: bool  #: a DLL's import: names compare case-insensitively
    platform: str  #: the OS whose system libraries count: the binary's own (a DLL in a Linux wheel too)
    searched: tuple[tuple[str, str], ...]  #: the importer's search path (:func:`search_path`)

    @property
    def dirs(self) -> tuple[str, ...]:
        return tuple(d for d, _whence in self.searched)


def resolve(ctx: AuditContext, path: str, report: FileReport, imp: Import) -> Resolution:
    """Resolve one import of the shipped library at ``path``: the first of the steps of the module's
    docstring that answers, else why it is not found."""
    name = macho_name(imp.library) if report.format is FileFormat.MACHO else imp.library
    # system libraries are those of the binary's own OS (a Windows DLL inside a Linux wheel is still a DLL)
    platform = _BINARY_OS.get(report.format, ctx.os) if report.format is not None else ctx.os
    if "/" in name and report.format is FileFormat.ELF:
        return _path_import(ctx, name, platform)
    pe = report.format is FileFormat.PE
    q = _Lookup(path, report, name, imp.library, pe, platform, search_path(ctx, path, report))
    for step in _STEPS:
        found = step(ctx, q)
        if found is not None:
            return _unless_optional(ctx, q, found)
    return _unless_optional(ctx, q, _not_found(ctx, q))


def loaded_on_demand(ctx: AuditContext, path: str) -> str | None:
    """Why the shipped library ``path`` is loaded only by name at run time, in words; None when it is not
    known to be. It is no Python extension module, no shipped library needs it (nothing loads it in a chain),
    and either a shipped library stores its name for dlopen (a plugin its host loads for a feature:
    onnxruntime-genai's CUDA library) or the package's Python code loads it by a name computed at run time
    (torchcodec's ``f"libtorchcodec_core{v}"``, its HEIC library by stem): when, and whether, it is loaded
    is the package's run-time decision (issue 32, classes 2 and 3). Computed once per library."""
    if path in ctx.on_demand:
        return ctx.on_demand[path]
    why: str | None = None
    report = ctx.libraries.get(path)
    if (
        report is not None
        and report.host is not None
        and not ctx.needed_by.get(path)
        and not is_extension_module(path, report.host.exports)
    ):
        base = posixpath.basename(path)
        hosts = [
            p
            for p, r in sorted(ctx.libraries.items())
            if p != path
            and r.host is not None
            and base in {posixpath.basename(n) for n in r.host.embedded_library_names}
        ]
        if hosts:
            why = f"{hosts[0]} loads it by name (dlopen) at run time"
        else:
            found = loaded_by_computed_name(ctx, path)
            if found is not None:
                why = f"the package's Python code loads it by name at run time ({found[0]}: {found[1]})"
    ctx.on_demand[path] = why
    return why


def _unless_optional(ctx: AuditContext, q: _Lookup, res: Resolution) -> Resolution:
    """An import that does not resolve, of a library that is itself optional (issue 32, classes 2 and 3):

    - loaded only by name at run time (:func:`loaded_on_demand`): the need is the feature's, a note; and
    - off the import path (:func:`on_import_path`), with the need installed by a requirement under one of the
      wheel's extras (Requires-Dist ``extra == "cuda"``, read against the NVIDIA library table, so it holds
      for an ``any`` wheel the index cannot resolve and offline too): an optional component behind the
      extra, a note naming it (``ctransformers[cuda]``).

    It still does not resolve (``ok`` false: a plain install cannot load it); how it is judged changes."""
    if res.ok:
        return res
    extra = None
    if q.report.format in (FileFormat.ELF, FileFormat.PE):
        extra = extra_providing(
            ctx.scan.dist.metadata.requires_dist,
            q.name,
            "linux" if q.report.format is FileFormat.ELF else "windows",
        )
    why = loaded_on_demand(ctx, q.path)
    if why is None and extra is not None and not on_import_path(ctx, q.path):
        why = (
            f"{q.path} is not loaded by `import` (no extension module, library or Python code of the "
            "import needs it)"
        )
    if why is None:
        return res
    if extra is None and not _known_source(ctx, q.name):
        # a need no source in the knowledge base provides (no NVIDIA, host, system or distribution library of
        # that name, no extra): no documented installation makes the optional library load, so it stays an
        # error (a misspelled DT_NEEDED in a plugin the package exists for)
        return replace(
            res,
            detail=f"{res.detail}; {q.path} is loaded only by name ({why}), but nothing cudaship knows "
            f"provides {posixpath.basename(q.name)}: no installation makes it load",
        )
    how = f"comes with {_own(ctx)}[{extra}]" if extra else "needed only when the package loads it"
    note = f"an optional library: {why}; {posixpath.basename(q.name)} {how}"
    return replace(res, detail=f"{res.detail}; {note}", note=note, extra=extra, optional=why)


def _known_source(ctx: AuditContext, name: str) -> bool:
    """Whether some installation is known to provide a library named ``name``: an NVIDIA library (its PyPI
    wheels or a toolkit), a host's (torch), a system library, a distribution package's or a release of a
    system library family (knowledge/data)."""
    base = posixpath.basename(name)
    return (
        identify(base) is not None
        or host_of_library(base, _own(ctx)) is not None
        or distribution_library(base) is not None
        or base.split(".", 1)[0].lower() in distribution_stems()
        or family_member(base) is not None
        or any(provider_of(base, platform) is not None for platform in ("linux", "windows", "macos"))
    )


def _path_import(ctx: AuditContext, name: str, platform: str) -> Resolution:
    """1. A path written into the import: a system library's, or outside the wheel."""
    provider = provider_of(posixpath.basename(name), platform, ctx.policy.closure.system_libraries)
    if provider is not None:
        return Resolution(Via(provider.value), None, f"{provider.value} library")
    return Resolution(Via.UNRESOLVED, None, f"absolute path {name} outside the wheel")


def _on_search_path(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """2. The search path: shipped files, then files a requirement installs there."""
    shipped = _first_shipped(ctx, q.path, q.searched, q.name, q.pe)
    if shipped is not None:
        found, whence = shipped
        inherited = f", through the {whence}" if whence.startswith("DT_RPATH of ") else ""
        real = ctx.linked.get(found)
        if real is not None:  # a link the wheel makes at install time names the shipped library
            detail = f"shipped at {real}, as the link {found} made at install time (symlinks.txt){inherited}"
            return Resolution(Via.SHIPPED, real, detail)
        return Resolution(Via.SHIPPED, found, f"shipped at {found}{inherited}")
    provided_at = _first_provided(ctx, q.path, q.searched, q.name, q.pe)
    if provided_at is None:
        return None
    provided, whence = provided_at
    res = _from_requirement(ctx, q.name, provided)
    if whence.startswith("DT_RPATH of "):
        res = replace(res, detail=f"{res.detail}, through the {whence}")
    return res


def _known_elsewhere(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """3. The NVIDIA driver, the interpreter, the operating system, a program's runtime, the policy's allow
    list."""
    provider = provider_of(q.name, q.platform, ctx.policy.closure.system_libraries)
    if provider is Provider.DRIVER:
        return Resolution(Via.DRIVER, None, "NVIDIA driver")
    if provider is not None:
        return Resolution(Via(provider.value), None, f"{provider.value} library")
    if ctx.is_program:
        runtime = runtime_providing(ctx.scan.kind.value, posixpath.basename(q.name), q.platform)
        if runtime is not None:
            return Resolution(
                Via.PROGRAM_RUNTIME, None, f"loaded by {runtime}, the runtime that loads the program"
            )
    allowed = name_match(ctx.policy.closure.allow, q.name)
    if allowed is not None:
        return Resolution(Via.ALLOWED, None, f"allowed by policy ({allowed})")
    return None


def _preloaded_by_requirement(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """4. Loaded before ours by a required package's import (torch loads its libraries)."""
    pre = ctx.providers.preloaded.get(posixpath.basename(q.name).lower())
    if pre is None:
        return None
    file, loader = pre
    who = f"{file.reached.label()}" if file.reached is not loader else loader.label()
    note = f"provided when installed as {_own(ctx)}[{loader.extra}]" if loader.extra else None
    return Resolution(
        Via.PRELOADED,
        file.path,
        f"{q.name} ← {who}, loaded by `import {loader.dist.name}` first ({file.path})",
        note,
        loader.extra,
    )


def _found_at_run_time(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """5. Found at run time by name wherever a requirement installs it (cuda-pathfinder, preload_dlls)."""
    lookup = ctx.providers.runtime_lookup
    anywhere = ctx.providers.named(q.name)
    if lookup is None or anywhere is None:
        return None
    note = _with_extra(ctx, anywhere, f"found at run time by {lookup}")
    detail = f"{q.name} ← {anywhere.reached.label()} at {anywhere.path}"
    return Resolution(Via.RUNTIME, anywhere.path, detail, note, anywhere.reached.extra)


def _other_build(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """6. Another build of a requirement that is loaded first (torch's CUDA builds)."""
    providers = ctx.providers
    for r in providers.closure.reached:
        if not any(c.preloads for c in conventions_for(r.dist.name)):
            continue
        build = builds_providing(r.dist.name, posixpath.basename(q.name), q.platform)
        if build is not None:
            return _build_resolution(ctx, q, r, build)
    return None


def _build_resolution(ctx: AuditContext, q: _Lookup, r: Reached, build: Build) -> Resolution:
    """One cause on every OS: the build `pip install` brings lacks the library, another build of the same
    project has it. The verdict follows what the brought build is, and each message says why the other case
    differs: a CPU build (torch on PyPI for Windows) sends every CUDA user to another build anyway, so
    needing one is the documented install (a note); a CUDA build of another major (torch on PyPI for Linux)
    is the build the wheel's own requirements install, which cannot load it (an error)."""
    name = q.name
    found = f"{r.dist.name} {r.dist.version} from {_source_kind(r)}"
    variant = ctx.variants.get(q.path)
    own_build = variant is not None and variant.train is not None and variant.train.major == build.cuda
    other_cuda = _cuda_build_of(ctx.providers, r)
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
    return Resolution(Via.BUILD, None, f"{name} ← {r.dist.name} (CUDA {build.cuda} build) via {r.via}", note)


def _on_demand(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """7. The importing library is loaded only on demand."""
    what = ctx.providers.on_demand(q.path)
    if what is None:
        return None
    return Resolution(Via.ON_DEMAND, None, f"{q.path} is loaded only by {what}", f"needed only by {what}")


def _optional_plugin(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """8b. A plugin (a library no shipped library needs and that Python does not import: its host loads it by
    name when the feature is asked for) whose dependency only one of the wheel's extras installs, off the
    plugin's search path: an optional component, a note naming the extra, not an error (issue 32, class 2).
    The extra's package brings and loads its libraries (TensorRT's ``import tensorrt``) before the feature
    that loads the plugin is used."""
    provided = ctx.providers.named(q.name)
    if provided is None or not provided.reached.extra or ctx.needed_by.get(q.path):
        return None
    report = q.report
    if report.host is not None and is_extension_module(q.path, report.host.exports):
        return None
    extra = provided.reached.extra
    note = (
        f"an optional plugin: {posixpath.basename(q.path)} is loaded by name for a feature, and "
        f"{posixpath.basename(q.name)} comes with {_own(ctx)}[{extra}]"
    )
    return Resolution(
        Via.OPTIONAL,
        provided.path,
        f"{q.name} ← {provided.reached.label()} at {provided.path}, off the search path; {note}",
        note,
        extra,
    )


def _computed_at_run_time(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """8a. Installed by a requirement off the search path, and the package's own Python code builds library
    paths at run time (``importlib.metadata`` into an environment variable its native holder dlopens): the
    static model cannot compute that path, so the verdict is uncertain (a warning naming ``audit --load``,
    never an error; issue 32, class 3)."""
    call, where = next(
        (
            (c, ctx.installed.get(loads.file, loads.file))
            for loads in ctx.scan.python_loads
            for c in loads.calls
            if c.kind == "computed"
        ),
        (None, ""),
    )
    if call is None:
        return None
    why = (
        f"uncertain: {where} line {call.line} builds library paths at run time ({call.mechanism}); "
        "`audit --load` runs the real loader"
    )
    copies = ctx.by_name.get(posixpath.basename(q.name).lower(), [])
    shipped = _nearest(q.path, copies) if copies else None
    if shipped is not None and preloaded_by_package(ctx, q.name, shipped, q.pe) is None:
        # the package's own library, off the search path: its code may compute that path too
        detail = f"{q.name} shipped at {shipped}, off the search path; {why}"
        return Resolution(Via.COMPUTED, shipped, detail, why, cause=where, uncertain=True, own=True)
    provided = ctx.providers.named(q.name)
    if provided is None:
        return None
    note = _with_extra(ctx, provided, why)
    return Resolution(
        Via.COMPUTED,
        provided.path,
        f"{q.name} ← {provided.reached.label()} at {provided.path}, off the search path; {note}",
        note,
        provided.reached.extra,
        cause=where,
        uncertain=True,
    )


def _not_found(ctx: AuditContext, q: _Lookup) -> Resolution:
    """8. Not found: say why, as precisely as possible."""
    name = q.name
    shipped_elsewhere = ctx.by_name.get(posixpath.basename(name).lower(), [])
    where = _shown(q.dirs)
    if shipped_elsewhere:
        return _shipped_off_path(ctx, q, _nearest(q.path, shipped_elsewhere), where)
    anywhere = ctx.providers.named(name)
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
    return _distribution_or_missing(ctx, q, where)


def _shipped_off_path(ctx: AuditContext, q: _Lookup, shipped: str, where: str) -> Resolution:
    """Shipped in the wheel, off the search path: a vendored directory the package's code adds (delvewheel's
    patch), else unresolved."""
    added = preloaded_by_package(ctx, q.name, shipped, q.pe)
    computed = dll_directory_computed(ctx, shipped) if added is None and q.pe else None
    if computed is not None:
        # the package adds a DLL directory it computes at run time (issue 32, class 3): uncertain
        where_py, mechanism = computed
        why = (
            f"uncertain: {where_py}: {mechanism}, which the static model cannot compute; `audit --load` runs "
            "the real loader"
        )
        detail = f"{q.name} shipped at {shipped}, off the search path; {why}"
        return Resolution(Via.COMPUTED, shipped, detail, why, cause=where_py, uncertain=True, own=True)
    if added is None:
        return Resolution(
            Via.UNRESOLVED, None, f"shipped at {shipped} but not on the search path (searched: {where})"
        )
    where_py, mechanism = added
    note = f"preloaded by the package's Python code ({where_py}: {mechanism})"
    return Resolution(
        Via.PACKAGE_PRELOAD,
        shipped,
        f"{q.name} shipped at {shipped}, off the search path, {note}",
        note,
        cause=where_py,
    )


def _nearest(importer: str, paths: Iterable[str]) -> str:
    """Of several shipped files of one name (one per CUDA major: ``cu12/cccl/x.dll``, ``cu13/cccl/x.dll``),
    the one nearest the importer: the longest common directory prefix, then path order."""
    own = posixpath.dirname(importer).split("/")

    def shared(path: str) -> int:
        n = 0
        for a, b in zip(own, posixpath.dirname(path).split("/"), strict=False):
            if a != b:
                break
            n += 1
        return n

    return min(sorted(paths), key=lambda p: -shared(p))


def _distribution_or_missing(ctx: AuditContext, q: _Lookup, where: str) -> Resolution:
    """9. A distribution library outside the manylinux policy: the user's system provides it, or not; else
    nothing provides it.

    Issue 32, class 8: on the import path of a wheel whose tag names a policy that does not allow it
    (``manylinux_2_28``: data/linux_policies.toml, from auditwheel's policy JSON), it is an error naming the
    Debian and RHEL package, whether or not full installs carry it: slim images fail, and auditwheel would
    not give that tag. Off the import path (a helper executable, a library nothing the import loads needs)
    it is a warning naming the package. A plain ``linux_<arch>`` tag promises nothing: a library installed by
    default is a warning, another an error."""
    name = q.name
    distro = distribution_library(name) if q.platform == "linux" else None
    if distro is None:
        return Resolution(
            Via.UNRESOLVED,
            None,
            f"not shipped, not a system library, no requirement provides it (searched: {where})",
        )
    base = posixpath.basename(name)
    policy = linux_policy(ctx.platform.tag) if q.report.format is FileFormat.ELF else None
    imported = on_import_path(ctx, q.path)
    if policy is not None and not policy.allows(base) and imported:
        return Resolution(
            Via.UNRESOLVED,
            None,
            f"not shipped: outside the {policy.name} policy of the wheel's tag ({distro.why}), on the import "
            f"path: needs the system package {distro.packages}, which slim images lack and the wheel cannot "
            f"declare; auditwheel repair would graft it (searched: {where})",
        )
    if distro.default or not imported:
        off = (
            ""
            if imported
            else f", off the import path ({posixpath.basename(q.path)} is not loaded by `import`)"
        )
        return Resolution(
            Via.DISTRIBUTION,
            None,
            f"a distribution library outside the manylinux policy{off}: needs the system package "
            f"{distro.packages} ({distro.why})",
            cause=f"{base} from {distro.debian} / {distro.rhel}",
        )
    return Resolution(
        Via.UNRESOLVED,
        None,
        f"not shipped: a distribution library outside the manylinux policy that is not installed by "
        f"default ({distro.why}): needs the system package {distro.packages}, which the wheel cannot "
        f"declare (searched: {where})",
    )


def on_import_path(ctx: AuditContext, path: str) -> bool:
    """Whether ``import`` of the package loads the shipped library ``path``: it is a Python extension module,
    the package's Python code loads it, or a library on the import path needs it (walked up the shipped
    libraries that need it, each once). A helper executable, or a plugin only dlopened, is not."""
    todo, seen = [path], {path}
    while todo:
        current = todo.pop()
        report = ctx.libraries.get(current)
        if report is None or report.host is None:
            continue
        if is_extension_module(current, report.host.exports):
            return True
        if preloaded_by_package(ctx, posixpath.basename(current), current, report.format is FileFormat.PE):
            return True
        for parent in ctx.needed_by.get(current, ()):
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return False


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
        candidates = [host_of_library(i.library, own) for i in canonical_imports(report)]
        if report.format in (FileFormat.ELF, FileFormat.MACHO):  # DT_RUNPATH / LC_RPATH into the host
            candidates += [host_of_directory(d, own) for d in search_dirs(ctx, path, report)]
        for h in candidates:
            if h is not None and canonicalize_name(h.project) not in declared:
                found.setdefault(h.project, h)
    hosts = tuple(found.values())
    ctx.undeclared_hosts = hosts
    return hosts


def _undeclared_host(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """4b. A library of a host package the wheel does not declare (torch: its users import it first), or one
    that host's builds bring and load first (torch's CUDA libraries): a warning naming the mechanism (class
    4 of issue 21), never a pass nor an error."""
    name, searched, platform = q.name, q.searched, q.platform
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


def _loaded_sibling(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """4c. An import naming the SONAME of a library shipped in the same wheel, which the search path does not
    reach (class 3 of issue 21). glibc first looks for an already loaded object of that name
    (``_dl_lookup_map``); so the import is satisfied when that library is loaded before the importer.

    The rule: a plugin, a library that no shipped library needs and whose name a shipped library stores for
    dlopen (its host loads it, so the host is loaded by then), is satisfied. Any other library that no
    shipped library needs (a Python extension module, a library the package's code loads) is satisfied
    only when something loaded the library first, which the import order decides: a warning naming that.
    A library that is itself needed by another (loaded as part of a chain) gets no such benefit: the loader
    searches for the name then, and fails (unless an RPATH up the chain reaches it).

    dyld does the same by install name (:data:`cudaship.analysis.loader.ALREADY_LOADED`): a load command
    ``@rpath/libfoo.so`` is satisfied by a loaded image whose ``LC_ID_DYLIB`` is ``@rpath/libfoo.so``,
    wherever its file lies; the same rule applies to a Mach-O module."""
    path, report, name = q.path, q.report, q.name
    if report.format not in (FileFormat.ELF, FileFormat.MACHO) or ctx.needed_by.get(path):
        return None
    if report.format is FileFormat.MACHO:
        targets = [
            t
            for t in ctx.by_name.get(posixpath.basename(name).lower(), ())
            if t != path and (r := ctx.libraries.get(t)) is not None and r.host is not None
            if dyld_reuses(q.written, r.host.soname)
        ]
        matched, rule = f"the install name {q.written}", ALREADY_LOADED["macho"][0]
    else:
        targets = [t for t in ctx.by_soname.get(posixpath.basename(name).lower(), ()) if t != path]
        matched, rule = "the SONAME", ALREADY_LOADED["elf"][0]
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
            f"{matched} of {target}, shipped in the wheel: {own} is a plugin {loaders[0]} loads by name "
            f"(dlopen), so {posixpath.basename(target)} is loaded by then ({rule})",
        )
    module = is_extension_module(path, report.host.exports if report.host else ())
    what = "a Python module" if module else "loaded by no shipped library"
    loaded_by = _what_loads(ctx, target, path)
    if loaded_by is None:  # nothing can have loaded it first: the loader fails (issue 32, class 8)
        return Resolution(
            Via.UNRESOLVED,
            None,
            f"{matched} of {target}, shipped in the wheel but not on the search path of {own} ({what}), and "
            f"nothing loads {posixpath.basename(target)} first (no shipped library needs it or loads it by "
            "name, it is no Python module, no Python code of the package loads it): the loader fails",
        )
    return Resolution(
        Via.LOADED,
        target,
        f"{matched} of {target}, shipped in the wheel but not on the search path of {own} ({what}): "
        f"satisfied only when {target} is already loaded when {own} is loaded ({loaded_by}; {rule})",
        "loaded first",
        cause=target,
    )


def _reached_by_sibling(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """8c (the last step). An import of a library a declared requirement installs, off the importer's own
    search path but on that of another library of the wheel, which is loaded first: glibc then finds the name
    among the loaded objects (``_dl_lookup_map``, the rule of :func:`_loaded_sibling`). The case: a Python
    extension module whose RUNPATH reaches ``nvidia/cublas/lib``, and a plugin beside it with no such RUNPATH
    that the package's code (or another package, Catalyst) dlopens after importing the module.

    Only for a library that no shipped library needs (one loaded in a chain would be searched for then), and
    only when the sibling is known to load first (a Python module, needed by another shipped library, loaded
    by name or by the package's code): satisfied only when it is, so a warning naming it, never a pass.
    ELF only: dyld's and Windows' reuse of loaded images is by install name and by module name, which the
    other steps model where they apply."""
    path, report, name = q.path, q.report, q.name
    if report.format is not FileFormat.ELF or "/" in name or ctx.needed_by.get(path):
        return None
    base = posixpath.basename(name)
    own = posixpath.basename(path)
    for other, r in sorted(ctx.libraries.items()):
        if other == path or r.host is None or r.format is not FileFormat.ELF:
            continue
        if base not in {posixpath.basename(i.library) for i in canonical_imports(r)}:
            continue
        if path in ctx.needed_by.get(other, ()) or own in {
            posixpath.basename(n) for n in r.host.embedded_library_names
        }:
            # the importer needs ``other`` (both come in one chain: no order to rely on), or ``other`` loads
            # the importer by name (a plugin of it: an optional library, which _unless_optional judges)
            continue
        found = _first_provided(ctx, other, search_path(ctx, other, r), base, False)
        if found is None or found[0].reached.extra is not None:
            continue
        provided = found[0]
        loaded_by: str | None = "it is a Python module the package imports"
        if not is_extension_module(other, r.host.exports):
            loaded_by = _what_loads(ctx, other, path)
        if loaded_by is None:
            continue
        return Resolution(
            Via.LOADED,
            provided.path,
            f"{base} ← {provided.reached.label()} at {provided.path}, which the search path of {own} does "
            f"not reach; {other} reaches it and is loaded first ({loaded_by}): satisfied only when {other} "
            f"is already loaded when {own} is loaded ({ALREADY_LOADED['elf'][0]})",
            "loaded first",
            cause=other,
        )
    return None


def _what_loads(ctx: AuditContext, target: str, importer: str) -> str | None:
    """What may load the shipped library ``target`` before another library needs its SONAME, in words; None
    when nothing does: no shipped library but ``importer`` needs it (loading it in a chain) or stores its name
    for dlopen, it
    is no Python extension module (imported), and no Python file of the package loads it."""
    needers = [p for p in ctx.needed_by.get(target, ()) if p != importer]
    if needers:
        return f"{needers[0]} needs it"
    base = posixpath.basename(target)
    for p, r in sorted(ctx.libraries.items()):
        if (
            p != target
            and r.host is not None
            and base in {posixpath.basename(n) for n in r.host.embedded_library_names}
        ):
            return f"{p} loads it by name"
    report = ctx.libraries.get(target)
    if report is not None and is_extension_module(target, report.host.exports if report.host else ()):
        return "it is a Python module the package imports"
    found = preloaded_by_package(ctx, base, target, False) or loaded_by_computed_name(ctx, target)
    if found is not None:
        return f"{found[0]}: {found[1]}"
    return None


def _package_preload(ctx: AuditContext, q: _Lookup) -> Resolution | None:
    """6b. Installed by a declared requirement and loaded first by the package's own Python code (class 1 of
    issue 21): ``ctypes.CDLL`` by name or glob, a helper loading that directory, ``os.add_dll_directory``."""
    name, provided, pe = q.name, ctx.providers.named(q.name), q.pe
    if provided is None:
        return None
    found = preloaded_by_package(ctx, name, provided.path, pe, provided.reached)
    if found is None:
        return None
    where, mechanism = found
    note = _with_extra(ctx, provided, f"preloaded by the package's Python code ({where}: {mechanism})")
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


def _with_extra(ctx: AuditContext, provided: Provided, note: str) -> str:
    """``note``, after the extra the wheel must be installed with for ``provided`` to be there."""
    extra = provided.reached.extra
    return f"provided when installed as {_own(ctx)}[{extra}]; {note}" if extra else note


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


def shipped_dependencies(ctx: AuditContext, path: str) -> tuple[tuple[Import, str], ...]:
    """Imports of ``path`` that resolve to shipped libraries, with the installed path of each."""
    report = ctx.libraries.get(path)
    if report is None or report.host is None:
        return ()
    out = []
    for imp in canonical_imports(report):
        res = resolve(ctx, path, report, imp)
        if res.via is Via.SHIPPED and res.target is not None:
            out.append((imp, res.target))
    return tuple(out)


#: The steps of :func:`resolve` after a path import, in order: the first that answers decides.
_STEPS: tuple[Callable[[AuditContext, _Lookup], Resolution | None], ...] = (
    _on_search_path,
    _known_elsewhere,
    _preloaded_by_requirement,
    _undeclared_host,
    _loaded_sibling,
    _found_at_run_time,
    _other_build,
    _package_preload,
    _on_demand,
    _computed_at_run_time,
    _optional_plugin,
    _reached_by_sibling,
)
