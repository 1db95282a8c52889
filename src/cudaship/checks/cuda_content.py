"""Whether a wheel carries CUDA code at all, and the first piece of evidence that it does.

CUDA code is any of: being one of NVIDIA's CUDA toolkit component wheels (nvidia_libraries.toml: their
headers and tools are the toolkit's); device code (a fatbin, cubin or PTX, in a library or on its own); a
native file that imports, dlopens by name or links statically a CUDA library or the driver
(:mod:`cudaship.analysis.linkage`, :func:`cudaship.knowledge.libraries.is_cuda_library`); a shipped CUDA
library itself; Python code or a shipped list that loads a CUDA library by name; CUDA sources or headers
(``.cu``, ``.cuh``: header-only libraries, kernels compiled at run time). A wheel that ships no native file
counts as using CUDA when it declares a CUDA distribution (``data/cuda_claims.toml`` ``[[requirements]]``:
a meta-package, a pure-Python layer on top of them). NVIDIA's GPU libraries outside the toolkit's table
(TensorRT, cuTENSOR, cuQuantum, nvCOMP: ``[[libraries]]``) count as CUDA libraries here, and a requirement on
a project through which the wheel's own code finds CUDA libraries at run time (``[[loaders]]``:
cuda-pathfinder) counts for any wheel.

The audit shows a wheel without any as "no CUDA code" (its first line and its summary), and the consistency
family fails one whose name or version claims CUDA (:mod:`cudaship.knowledge.cuda_claims`).
"""

from __future__ import annotations

import posixpath

from cudaship.checks.context import AuditContext
from cudaship.knowledge.cuda_claims import claim, is_cuda_distribution, is_cuda_loader, is_nvidia_gpu_library
from cudaship.knowledge.libraries import is_cuda_library as _is_toolkit_library
from cudaship.knowledge.libraries import is_toolkit_component
from cudaship.knowledge.system_libraries import provider_of
from cudaship.records.files import DriverAccess, RuntimeLinkage

_SOURCES = (".cu", ".cuh")


def is_cuda_library(name: str) -> bool:
    """A CUDA toolkit or driver library, or one of NVIDIA's GPU libraries built on CUDA (TensorRT,
    cuQuantum)."""
    return _is_toolkit_library(name) or is_nvidia_gpu_library(name)


def cuda_evidence(ctx: AuditContext) -> str | None:
    """The first thing showing that the wheel carries CUDA code, in words; None when nothing does."""
    project = ctx.scan.dist.metadata.name
    if project and is_toolkit_component(project):  # headers and tools of the toolkit (nvidia-nvtx-cu12)
        return f"{project} is a CUDA toolkit component wheel (knowledge/data/nvidia_libraries.toml)"
    reports = ctx.reports
    for path, report in sorted(reports.items()):
        if report.device_code:
            return f"device code in {path}"
    for path, report in sorted(reports.items()):
        if is_cuda_library(posixpath.basename(path)):
            return f"ships the CUDA library {path}"
        host = report.host
        if host is None:
            continue
        for imp in host.imports:
            if is_cuda_library(imp.library):
                return f"{path} imports {imp.library}"
        for name in host.embedded_library_names:
            if is_cuda_library(name):
                return f"{path} loads {name} by name"
        link = report.linkage
        static = link is not None and link.runtime is not RuntimeLinkage.NONE
        if static or (link is not None and link.driver is not DriverAccess.NONE):
            return f"{path} links the CUDA runtime or reaches the driver"
    for loads in ctx.scan.python_loads:
        for text in loads.strings:
            if is_cuda_library(text):
                return f"{loads.file} loads {text}"
    for listed in ctx.scan.library_lists:
        for name in listed.names:
            if is_cuda_library(name):
                return f"{listed.file} lists {name}"
    for path in ctx.files:
        if path.lower().endswith(_SOURCES):
            return f"CUDA source {path}"
    for req in ctx.declared:
        if is_cuda_loader(req.name):
            return f"requires {req.text}, through which its code finds CUDA libraries at run time"
    outside = _outside_import(ctx)
    if outside is not None:
        for req in ctx.declared:
            if claim(req.name, None) is not None:
                return (
                    f"{outside[0]} imports {outside[1]}, from outside the wheel, and it requires {req.text}"
                )
    if not ctx.libraries:
        for req in ctx.declared:
            if is_cuda_distribution(req.name):
                return f"requires {req.text}"
    return None


def _outside_import(ctx: AuditContext) -> tuple[str, str] | None:
    """The first (native file, library) whose import is neither shipped in the wheel nor the system's: the
    wheel builds on a library another distribution installs (kvikio's extensions on libkvikio-cu12's
    ``libkvikio.so``). With a requirement whose own name claims CUDA, that is CUDA code."""
    for path, report in sorted(ctx.libraries.items()):
        assert report.host is not None
        for imp in report.host.imports:
            name = posixpath.basename(imp.library).lower()
            if name in ctx.by_soname or provider_of(imp.library, ctx.os) is not None:
                continue
            return path, imp.library
    return None
