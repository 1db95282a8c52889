"""What ``cudaship repair`` needs to know (``data/repair.toml`` plus ``nvidia_libraries.toml`` and the
``cuda-toolkit`` extras of ``providers.toml``), as pure functions:

* :func:`unhashed` — the name a library had before auditwheel or delvewheel renamed its copy
  (``libcudart-96c42e41.so.13`` → ``libcudart.so.13``).
* :func:`provision` — the NVIDIA wheel that provides a library for a CUDA major: project, directory, the
  requirement repair adds and why that form.
* :func:`provided_names` — every library file name NVIDIA's wheels provide for a CUDA major and OS (the
  exclude lists for auditwheel and delvewheel).
* :func:`pypi_file_limit` — PyPI's default limit on one file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data
from cudaship.knowledge.libraries import (
    OS,
    components,
    cuda_versioned_projects,
    identify,
    library_file,
    pypi_package,
)
from cudaship.knowledge.providers import toolkit_extras
from cudaship.once import once

_FILE = "repair.toml"


@dataclass(frozen=True)
class _Form:
    major: int
    form: str
    source: str


@once
def _forms() -> dict[int, _Form]:
    out: dict[int, _Form] = {}
    for row in _data.document(_FILE).rows("requirement"):
        major = row.number("major", "a CUDA major")
        row.require("form", "toolkit or component")
        form = row.string("form", choices=("toolkit", "component")) or ""
        out[major] = _Form(major, form, row.text("source"))
    return out


@once
def _patterns() -> dict[str, re.Pattern[str]]:
    table = _data.section(_FILE, "hashed_names")
    out: dict[str, re.Pattern[str]] = {}
    for os_name in ("linux", "windows"):
        text = table.text(os_name, "a regex")
        out[os_name] = re.compile(text, re.IGNORECASE if os_name == "windows" else 0)
    return out


def _marker(os: OS) -> str:
    return _data.section(_FILE, "markers").text(os, "an environment marker")


def pypi_file_limit() -> int:
    """PyPI's default upper limit on one uploaded file, in bytes."""
    return _data.section(_FILE, "pypi").number("file_size_limit", "bytes")


def unhashed(name: str, os: OS) -> str:
    """``name`` without the content hash auditwheel (Linux) or delvewheel (Windows) put in a copy's name;
    ``name`` itself when it has none."""
    match = _patterns()[os].match(name)
    if match is None:
        return name
    return match.group("stem") + match.group("rest")


@dataclass(frozen=True)
class Provision:
    """The NVIDIA wheel that provides one library."""

    library: str  #: the library's own name (``libcudart.so.13``), without a copy's hash
    component: str  #: ``cudart``
    major: int  #: the CUDA major of the wheel that provides it
    project: str  #: the component's PyPI project (``nvidia-cuda-runtime``)
    directory: str  #: where that project installs it, inside site-packages (``nvidia/cu13/lib``)
    requirement: str  #: what repair declares (``cuda-toolkit[cudart]>=13.0,<14; sys_platform == "linux"``)
    requirement_name: str  #: the canonical project name of that requirement (``cuda-toolkit``)
    extra: str | None  #: the cuda-toolkit extra, when the requirement is one
    why: str  #: the form's reason, one line


def _toolkit_extra(component: str, project: str, major: int) -> str | None:
    """The cuda-toolkit extra that installs ``project``: the one named after the component, else the one
    installing the fewest projects (``cublas`` for cuBLASLt)."""

    holding = [(len(p), e) for e, p in toolkit_extras(major).items() if project in p]
    if not holding:
        return None
    named = [e for _, e in holding if e == component.lower()]
    return named[0] if named else min(holding)[1]


def _follows_cuda(project: str) -> bool:

    return re.sub(r"-cu\d+$", "", project) in cuda_versioned_projects()


def _apart(project: str) -> bool:
    apart = _data.section(_FILE, "soname").strings("apart", single=False)
    return re.sub(r"-cu\d+$", "", project) in apart


def provision(name: str, os: OS, major: int | None, minor: int | None = None) -> Provision | None:
    """The NVIDIA wheel that provides library ``name`` (a copy's hash removed) on ``os``: for ``major`` when
    the name is that major's (``libcurand.so.10`` is 11's, 12's and 13's), else for the one major the name
    belongs to. ``minor`` is the train's (the requirement's lower bound). None when no NVIDIA wheel provides
    it (a driver library, an unknown name, a component without a wheel for that OS, several majors and none
    chosen)."""
    plain = unhashed(name, os)
    found = identify(plain)
    if found is None or found.driver or found.os != os:
        return None
    majors = found.cuda_majors
    if major is not None and major in majors:
        chosen = major
    elif len(majors) == 1:
        chosen = majors[0]
    else:
        return None
    pkg = pypi_package(found.component, chosen, os)
    if pkg is None:
        return None
    own = library_file(found.component, chosen, os)
    if own is None:
        return None
    if os == "linux" and own != plain and not plain.startswith(own + "."):
        return None  # libcudart.so.12.0.107 (a copy named by its full version) is libcudart.so.12's
    if os == "windows" and own.lower() != plain.lower():
        return None
    form = _forms().get(chosen)
    low = f"{chosen}.{minor}" if minor is not None and chosen == major else f"{chosen}"
    bound = f">={low},<{chosen + 1}"
    marker = _marker(os)
    extra = _toolkit_extra(found.component, pkg.project, chosen) if form and form.form == "toolkit" else None
    if extra is not None:
        text = f"cuda-toolkit[{extra}]{bound}; {marker}"
        why = f"the cuda-toolkit[{extra}] extra installs {pkg.project}: NVIDIA's form for CUDA {chosen}"
        return Provision(
            own, found.component, chosen, pkg.project, pkg.directory, text, "cuda-toolkit", extra, why
        )
    soname_major = own.split(".so.", 1)[1].split(".")[0] if os == "linux" and ".so." in own else None
    if _follows_cuda(pkg.project):
        text = f"{pkg.project}{bound}; {marker}"
        why = f"{pkg.project}'s versions follow CUDA's"
    elif soname_major is not None and soname_major.isdigit() and not _apart(pkg.project):
        n = int(soname_major)
        text = f"{pkg.project}>={n},<{n + 1}; {marker}"
        why = f"{pkg.project}'s versions follow the soname's major ({own})"
    else:
        text = f"{pkg.project}; {marker}"
        why = f"{pkg.project} is numbered apart from CUDA; its -cu suffix or its row names CUDA {chosen}"
    return Provision(own, found.component, chosen, pkg.project, pkg.directory, text, pkg.project, None, why)


def provided_names(major: int, os: OS) -> tuple[str, ...]:
    """Every library file name an NVIDIA wheel provides for CUDA ``major`` on ``os``, sorted."""
    out: set[str] = set()
    for comp in components():
        try:
            pkg = pypi_package(comp, major, os)
        except KnowledgeError:
            continue
        name = library_file(comp, major, os) if pkg is not None else None
        if name is not None:
            out.add(name)
    return tuple(sorted(out, key=str.lower))


def nvidia_directories(major: int, os: OS) -> tuple[str, ...]:
    """Every site-packages directory NVIDIA's wheels install libraries into for CUDA ``major`` on ``os``."""
    out: set[str] = set()
    for comp in components():
        pkg = pypi_package(comp, major, os)
        if pkg is not None:
            out.add(pkg.directory)
    return tuple(sorted(out))
