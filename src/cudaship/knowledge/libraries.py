"""NVIDIA libraries by file name: what a ``DT_NEEDED`` / PE import / embedded name refers to.

The facts live in ``data/nvidia_libraries.toml`` (one table per component, one row per CUDA major, each with
its source). These pure functions answer the questions the checks ask:

* :func:`identify` — ``"libcublasLt.so.13"`` → component ``cublasLt``, Linux, CUDA major 13;
  ``"cudart64_110.dll"`` → ``cudart``, Windows, CUDA 11; ``"libcufft.so.12"`` → ``cufft``, CUDA 13
  (cuFFT keeps its own soname major). Directory parts are ignored; Windows names match case-insensitively.
* :func:`is_cuda_library` / :func:`is_driver` — a toolkit library (shipped by a wheel or the toolkit) versus
  a driver library (``libcuda.so.1``, ``nvcuda.dll``: installed with the driver, never shipped).
* :func:`cudart_major` — the CUDA major of a CUDA runtime name, also for majors the data has no row for.
* :func:`pypi_package` — which PyPI project installs a component for a CUDA major and OS, and where.
* :func:`project_cuda_major` — the CUDA major a requirement on an NVIDIA PyPI project names, None for the
  projects whose version says nothing about CUDA (``nvidia-cudnn-frontend`` 1.x, ``nvidia-cutlass-dsl`` 4.x).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data
from cudaship.once import once

OS = Literal["linux", "windows"]
_FILE = "nvidia_libraries.toml"


@dataclass(frozen=True)
class NvidiaLibrary:
    """What a library file name says."""

    name: str  #: the file name looked up (without directories)
    component: str  #: key of the data table: "cudart", "cublasLt", "cufft", "cuda" (the driver) ...
    os: OS
    version: str | None  #: the version in the name: "13" (libcudart.so.13), "110" (cudart64_110.dll), None
    cuda_majors: tuple[int, ...]  #: CUDA majors whose toolkit ships this exact name (empty when unknown)
    driver: bool  #: installed by the NVIDIA driver (libcuda.so.1, nvcuda.dll)
    description: str


@dataclass(frozen=True)
class PypiPackage:
    """Where a PyPI project installs a component's libraries."""

    project: str  #: "nvidia-cuda-runtime" (CUDA 13), "nvidia-cuda-runtime-cu12" ...
    directory: str  #: inside site-packages, with "/": "nvidia/cu13/lib"


@dataclass(frozen=True)
class _Row:
    major: int
    linux: str | None
    windows: str | None
    pypi: str | None
    linux_dir: str | None
    windows_dir: str | None


@dataclass(frozen=True)
class _Component:
    name: str
    description: str
    linux_stem: str | None
    windows: re.Pattern[str] | None
    driver: bool
    rows: tuple[_Row, ...]


@once
def _components() -> tuple[_Component, ...]:
    out = []
    for name, spec in _data.section(_FILE, "components").tables():
        windows = spec.string("windows")
        rows = [
            _Row(
                row.number("major", "an integer CUDA major"),
                row.string("linux"),
                row.string("windows"),
                row.string("pypi"),
                row.string("linux_dir"),
                row.string("windows_dir"),
            )
            for row in spec.rows("cuda")
        ]
        try:
            pattern = re.compile(windows, re.IGNORECASE) if windows else None
        except re.error as e:
            raise spec.fail(spec.dotted("windows"), f"is not a valid regex: {e}") from e
        out.append(
            _Component(
                name=name,
                description=spec.string("description") or name,
                linux_stem=spec.string("linux"),
                windows=pattern,
                driver=spec.boolean("driver", False),
                rows=tuple(rows),
            )
        )
    return tuple(out)


def components() -> tuple[str, ...]:
    """Every component the data knows, in data order."""
    return tuple(c.name for c in _components())


def _basename(libname: str) -> str:
    return re.split(r"[/\\]", libname)[-1]


def identify(libname: str) -> NvidiaLibrary | None:
    """What an NVIDIA library file name is, or None for any other name (directories are ignored)."""
    name = _basename(libname)
    for comp in _components():
        if comp.linux_stem and (name == comp.linux_stem or name.startswith(comp.linux_stem + ".")):
            rest = name[len(comp.linux_stem) + 1 :]
            if rest and not re.fullmatch(r"[0-9]+(?:\.[0-9]+)*", rest):
                continue
            version = rest or None
            majors = tuple(
                r.major
                for r in comp.rows
                if version and r.linux and (version == r.linux or version.startswith(r.linux + "."))
            )
            return NvidiaLibrary(name, comp.name, "linux", version, majors, comp.driver, comp.description)
        if comp.windows is not None:
            match = comp.windows.fullmatch(name)
            if match:
                version = match.groupdict().get("v")
                majors = tuple(r.major for r in comp.rows if version and r.windows == version)
                return NvidiaLibrary(
                    name, comp.name, "windows", version, majors, comp.driver, comp.description
                )
    return None


def is_cuda_library(libname: str) -> bool:
    """True for any NVIDIA CUDA library name (toolkit or driver)."""
    return identify(libname) is not None


def is_driver(libname: str) -> bool:
    """True for the libraries the NVIDIA driver installs: ``libcuda.so[.1]``, ``nvcuda.dll``, NVML."""
    found = identify(libname)
    return found is not None and found.driver


def cudart_major(libname: str) -> int | None:
    """The CUDA major of a CUDA runtime library name; None when the name is not the CUDA runtime.

    Known rows answer first. Otherwise: Linux ``libcudart.so.N`` → N; Windows ``cudart64_N.dll`` → N for the
    two-digit majors used since CUDA 12 (``12``, ``13``), and the tens of a three-digit or old ``X.Y`` form
    (``110`` → 11, ``102`` → 10, ``92`` → 9; the first two-digit form, ``cudart64_65``, was CUDA 6.5).
    """
    found = identify(libname)
    if found is None or found.component != "cudart":
        return None
    if found.cuda_majors:
        return found.cuda_majors[0]
    if found.version is None:
        return None
    head = found.version.split(".", 1)[0]
    if not head.isdigit():
        return None
    number = int(head)
    if found.os == "linux":
        return number
    if len(head) >= 3 or number >= 65:
        return number // 10
    return number


def pypi_package(component: str, cuda_major: int, os: OS) -> PypiPackage | None:
    """The PyPI project that installs ``component`` for ``cuda_major`` on ``os``, and its directory; None when
    the data has no such row (or the component has no wheel for that OS, such as NCCL on Windows).

    Raises KnowledgeError for a component name the data does not know.
    """
    for comp in _components():
        if comp.name != component:
            continue
        for row in comp.rows:
            if row.major == cuda_major and row.pypi:
                directory = row.linux_dir if os == "linux" else row.windows_dir
                return PypiPackage(row.pypi, directory) if directory else None
        return None
    raise KnowledgeError(f"unknown NVIDIA library component {component!r} (known: {', '.join(components())})")


def library_file(component: str, cuda_major: int, os: OS) -> str | None:
    """The file name a component has for a CUDA major: ``("cufft", 13, "linux")`` → ``libcufft.so.12``."""
    for comp in _components():
        if comp.name != component:
            continue
        for row in comp.rows:
            if row.major != cuda_major:
                continue
            if os == "linux" and comp.linux_stem and row.linux:
                return f"{comp.linux_stem}.{row.linux}"
            if os == "windows" and comp.windows is not None and row.windows:
                return _windows_name(comp.windows.pattern, row.windows)
        return None
    raise KnowledgeError(f"unknown NVIDIA library component {component!r}")


def _windows_name(pattern: str, version: str) -> str | None:
    """Fill the ``v`` group of a simple Windows name pattern (``cudart(?:64|32)_(?P<v>\\d+)\\.dll``)."""
    text = re.sub(r"\(\?P<v>[^)]*\)", version, pattern)
    text = re.sub(r"\(\?:([^|)]*)\|[^)]*\)", r"\1", text)  # first alternative: 64-bit names
    text = text.replace("\\.", ".")
    return None if re.search(r"[\\()?*+\[\]]", text) else text


_CU_SUFFIX = re.compile(r"-cu(\d+)$")


@once
def _cuda_versioned() -> frozenset[str]:
    projects = _data.section(_FILE, "pypi").strings("cuda_versioned", single=False)
    return frozenset(_canonical(p) for p in projects)


def cuda_versioned_projects() -> frozenset[str]:
    """Canonical names of the NVIDIA projects whose versions follow CUDA's (``[pypi].cuda_versioned``)."""
    return _cuda_versioned()


@once
def _row_majors() -> dict[str, frozenset[int]]:
    """PyPI project -> the CUDA majors the component rows name it for."""
    found: dict[str, set[int]] = {}
    for comp in _components():
        for row in comp.rows:
            if row.pypi:
                found.setdefault(_canonical(row.pypi), set()).add(row.major)
    return {project: frozenset(majors) for project, majors in found.items()}


def is_toolkit_component(project: str) -> bool:
    """``project`` is one of NVIDIA's CUDA component wheels (``nvidia-nvtx-cu12``, ``nvidia-cuda-opencl``):
    a ``[pypi].cuda_versioned`` project or one a component row names, with or without its ``-cuXY``
    suffix. Its files are the CUDA toolkit's, headers and tools included."""
    name = _canonical(project)
    bare = re.sub(r"-cu[0-9]+$", "", name)
    return any(n in _cuda_versioned() or n in _row_majors() for n in (name, bare))


def _canonical(project: str) -> str:
    return re.sub(r"[-_.]+", "-", project).lower()


def project_cuda_major(project: str, lower_bound: str | None) -> int | None:
    """The CUDA major a requirement on ``project`` names (``lower_bound``: the version its specifier starts
    from, ``"13.0"`` for ``>=13.0``, None when it has none), by the rules of the ``[pypi]`` table's comment:
    a ``-cuXY`` suffix; the version's major for a CUDA-versioned project; the one major a component row names
    the project for. None for every other project: its version is not a CUDA version."""
    name = _canonical(project)
    suffix = _CU_SUFFIX.search(name)
    if suffix:
        return int(suffix.group(1))
    if name in _cuda_versioned() and lower_bound:
        head = lower_bound.split(".")[0].rstrip("*")
        if head.isdigit():
            return int(head)
    majors = _row_majors().get(name, frozenset())
    if len(majors) == 1:
        return next(iter(majors))
    return None
