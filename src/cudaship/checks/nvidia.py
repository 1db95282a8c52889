"""NVIDIA library facts the checks need, over :mod:`cudaship.knowledge.libraries`: which NVIDIA project would
provide an imported CUDA library (of the right CUDA major), to say what to declare when nothing provides it.
Which declared requirement actually provides a file is :mod:`cudaship.checks.providers`' business."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from cudaship.errors import KnowledgeError
from cudaship.knowledge.libraries import OS, NvidiaLibrary, identify, project_cuda_major, pypi_package
from cudaship.knowledge.providers import toolkit_extras
from cudaship.knowledge.repair import provision
from cudaship.wheel.records import DeclaredRequirement

if TYPE_CHECKING:
    from cudaship.checks.context import AuditContext


def requirement_major(req: DeclaredRequirement) -> int | None:
    """The CUDA major a requirement pins (:func:`~cudaship.knowledge.libraries.project_cuda_major`): a
    ``-cu12`` name suffix; the lower bound for a CUDA-versioned project such as ``nvidia-cublas``; the one
    major the data names an unsuffixed project for (``nvidia-cufft`` 12.x is CUDA 13's). None for projects
    whose version is not a CUDA version (``nvidia-cudnn-frontend>=1.5``, ``nvidia-cutlass-dsl>=4``)."""
    return project_cuda_major(req.name, _lower_bound(req.specifier))


def _lower_bound(specifier: str) -> str | None:
    try:
        spec = SpecifierSet(specifier)
    except InvalidSpecifier:
        return None
    for s in spec:
        if s.operator in (">=", "==", "~=", "===", ">"):
            return s.version
    return None


def library(name: str) -> NvidiaLibrary | None:
    """The NVIDIA toolkit library ``name`` is (None for other names and for the driver's libraries)."""
    found = identify(name)
    if found is None or found.driver:
        return None
    return found


def _os(name: str) -> str:
    return name if name in ("linux", "windows") else "linux"


def _packages(lib: NvidiaLibrary, os_name: str) -> list[tuple[int, str, str]]:
    """(CUDA major, PyPI project, directory) for each CUDA major whose toolkit ships ``lib``."""
    out: list[tuple[int, str, str]] = []
    for major in lib.cuda_majors:
        try:
            pkg = pypi_package(lib.component, major, _os(os_name))  # type: ignore[arg-type]
        except KnowledgeError:
            continue
        if pkg is not None:
            out.append((major, canonicalize_name(pkg.project), pkg.directory))
    return out


def _declared(
    declared: tuple[DeclaredRequirement, ...], project: str, major: int
) -> DeclaredRequirement | None:
    """The first declared requirement on ``project`` that does not pin a CUDA major other than ``major``."""
    for req in declared:
        if req.name == project and requirement_major(req) in (None, major):
            return req
    return None


def providing(
    lib: NvidiaLibrary, declared: tuple[DeclaredRequirement, ...], os_name: str
) -> tuple[DeclaredRequirement, str] | None:
    """The declared requirement that installs ``lib`` (of a CUDA major that ships it) and the directory."""
    for major, project, directory in _packages(lib, os_name):
        req = _declared(declared, project, major)
        if req is not None:
            return req, directory
    return None


def provided_by(lib: NvidiaLibrary, declared: tuple[DeclaredRequirement, ...], os_name: str) -> str | None:
    """None when a declared requirement provides ``lib``; else a one-line account of what is missing."""
    if providing(lib, declared, os_name) is not None:
        return None
    packages = _packages(lib, os_name)
    what = f"{lib.name} ({lib.description}" + (
        f", CUDA {'/'.join(str(m) for m in lib.cuda_majors)})" if lib.cuda_majors else ", CUDA major unknown)"
    )
    if not packages:
        return f"imports {what}: not shipped, and no NVIDIA wheel for {os_name} is known to provide it"
    names = {p for _, p, _ in packages}
    wrong = [r for r in declared if r.name in names]
    if wrong:
        return f"imports {what}, but the declared {wrong[0].text} is for another CUDA major"
    wanted = " or ".join(sorted({f"{p} (CUDA {m})" for m, p, _ in packages}))
    return f"imports {what}: not shipped, and no declared requirement provides it (declare {wanted})"


def requirement_hint(ctx: AuditContext, name: str) -> str | None:
    """Why an NVIDIA library did not resolve: undeclared, or declared but out of the search path."""
    lib = library(name)
    if lib is None:
        return None
    found = providing(lib, ctx.declared, ctx.os)
    if found is not None:
        req, directory = found
        return f"{req.text} installs it in {directory}, which the search path does not reach"
    problem = provided_by(lib, ctx.declared, ctx.os)
    return problem.split(": ", 1)[1] if problem and ": " in problem else problem


_EXTRA = re.compile(r"""\bextra\s*==\s*['"]([^'"]+)['"]""")

#: CUDA majors whose NVIDIA wheels an extra may name (``cuda-toolkit[cublas]==12.*``, ``nvidia-cublas-cu12``)
_MAJORS = (11, 12, 13)


def extra_providing(requires_dist: Iterable[str], library: str, os: OS) -> str | None:
    """The extra of a distribution (its Requires-Dist) whose requirements install the NVIDIA wheel that
    provides ``library`` (``cupy-cuda12x[ctk]`` for libcublas.so.12: ``cuda-toolkit[cublas,...]==12.*``;
    ``pkg[cu13]`` for libnvrtc.so.13); None when no extra does. What ``doctor --env`` names for a library
    the environment lacks, judged as the audit judges it (an extra, a note)."""
    for text in requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        extra = _EXTRA.search(str(req.marker)) if req.marker is not None else None
        if extra is None:
            continue
        name = canonicalize_name(req.name)
        for major in _MAJORS:
            p = provision(library, os, major)
            if p is None:
                continue
            if name == canonicalize_name(p.project):
                return extra.group(1)
            if name != "cuda-toolkit" or not any(
                p.project in toolkit_extras(major).get(e.lower(), ()) for e in req.extras
            ):
                continue
            if not req.specifier or req.specifier.contains(f"{major}.0", prereleases=True):
                return extra.group(1)
    return None
