"""What ``cudaship repair`` needs to know (``data/repair.toml`` plus ``nvidia_libraries.toml`` and the
``cuda-toolkit`` extras of ``providers.toml``), as pure functions:

* :func:`unhashed` — the name a library had before auditwheel or delvewheel renamed its copy
  (``libcudart-96c42e41.so.13`` → ``libcudart.so.13``).
* :func:`provision` — the NVIDIA wheel that provides a library for a CUDA major: project, directory, the
  requirement repair adds and why that form.
* :func:`providers_of` — every NVIDIA wheel (and its directory) that ships a library, whatever the major.
* :func:`provided_names` — every library file name NVIDIA's wheels provide for a CUDA major and OS (the
  exclude lists for auditwheel and delvewheel).
* :func:`pypi_file_limit` — PyPI's default limit on one file.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cudaship.knowledge import _data
from cudaship.knowledge.libraries import OS, cudart_major, identify
from cudaship.knowledge.nvidia_wheels import ProviderRow, provider_rows
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


def _is_copy_of(plain: str, own: str, os: OS, copies: SpecifierSet | None) -> bool:
    """Whether a library named ``plain`` (a copy's hash removed) is the file ``own``: the same name, or on
    Linux a name carrying the full version of that file (``libcudnn.so.8.9.7`` is ``libcudnn.so.8``;
    ``libcudart.so.11.8.89`` is ``libcudart.so.11.0`` by the row's ``copies``)."""
    if os == "windows":
        return plain.lower() == own.lower()
    if plain == own:
        return True
    stem, sep, version = own.partition(".so.")
    if not sep or not plain.startswith(stem + ".so."):
        return False
    full = plain[len(stem) + 4 :]
    if not re.fullmatch(r"[0-9]+(?:\.[0-9]+)*", full):
        return False
    if copies is not None:
        return Version(full) in copies
    return full.startswith(version + ".")


def _rows_for(plain: str, os: OS, machine: str | None) -> list[ProviderRow]:
    out = []
    for row in provider_rows():
        path = row.path(os)
        if (
            path is not None
            and row.claims(os, machine)
            and _is_copy_of(plain, posixpath.basename(path), os, row.copies)
        ):
            out.append(row)
    return out


def _choose(rows: list[ProviderRow], major: int | None) -> ProviderRow | None:
    """The row for the train's major; else the one major the rows serve (a CUDA 11 library in a wheel of
    another train is CUDA 11's); None when several majors and none chosen."""
    mine = [r for r in rows if major is not None and r.cuda == major]
    if mine:
        return mine[0]
    majors = {r.cuda for r in rows}
    return rows[0] if len(majors) == 1 else None


def provision(
    name: str, os: OS, major: int | None, minor: int | None = None, machine: str | None = None
) -> Provision | None:
    """The NVIDIA wheel that provides library ``name`` (a copy's hash removed; on Linux a SONAME or a file
    named by its full version) on ``os`` (``machine``: the wheel's, None for any): the row of
    ``repair_providers.toml`` for ``major`` when there is one (cuDNN 8 in a CUDA 12 wheel is
    ``nvidia-cudnn-cu12`` 8.x), else for the one major the rows of that file serve. ``minor`` is the
    train's (the lower bound of a range that follows CUDA's). None when no checked NVIDIA wheel ships the
    file (a driver library, an unknown name or version, NVTX on Windows, CUDA 10, several majors and none
    chosen): :func:`unprovided` says why."""
    plain = unhashed(name, os)
    found = identify(plain)
    if found is None or found.driver or found.os != os:
        return None
    row = _choose(_rows_for(plain, os, machine), major)
    if row is None:
        return None
    path = row.path(os)
    assert path is not None
    own, directory = posixpath.basename(path), posixpath.dirname(path)
    chosen = row.cuda
    form = _forms().get(chosen)
    low = f"{chosen}.{minor}" if minor is not None and chosen == major else f"{chosen}"
    train_bound = f">={low},<{chosen + 1}"
    marker = _marker(os)
    here = f"{os}-{machine}" if machine else None
    shown = [(p, v) for p, v in row.checked if p == here or (here is None and p.startswith(os))]
    checked = ", ".join(f"{v} on {p}" for p, v in shown)
    extra = _toolkit_extra(row.component, row.project, chosen) if form and form.form == "toolkit" else None
    if extra is not None:
        text = f"cuda-toolkit[{extra}]{train_bound}; {marker}"
        why = f"the cuda-toolkit[{extra}] extra installs {row.project}: NVIDIA's form for CUDA {chosen}"
        return Provision(own, row.component, chosen, row.project, directory, text, "cuda-toolkit", extra, why)
    if row.range == "train":
        text = f"{row.project}{train_bound}; {marker}"
        why = f"{row.project}'s versions follow CUDA's; it ships {path} ({checked})"
    else:
        text = f"{row.project}{_specifier_text(row.range)}; {marker}"
        why = f"{row.project}{_specifier_text(row.range)} ships {path} for CUDA {chosen} ({checked})"
    return Provision(own, row.component, chosen, row.project, directory, text, row.project, None, why)


def providers_of(name: str, os: OS, machine: str | None = None) -> tuple[tuple[str, str], ...]:
    """(project, directory) of every NVIDIA wheel that ships library ``name`` (a copy's hash removed) on
    ``os``, for any CUDA major: ``libcufile.so.0`` is nvidia-cufile-cu12's in ``nvidia/cufile/lib`` and
    nvidia-cufile's in ``nvidia/cu13/lib``. Empty for a name no checked NVIDIA wheel ships."""
    plain = unhashed(name, os)
    found = identify(plain)
    if found is None or found.driver or found.os != os:
        return ()
    out = []
    for row in _rows_for(plain, os, machine):
        path = row.path(os)
        assert path is not None
        out.append((row.project, posixpath.dirname(path)))
    return tuple(dict.fromkeys(out))


def _specifier_text(spec: str) -> str:
    """``>=8,<9`` in the order it was written (SpecifierSet sorts its members)."""
    return ",".join(s.strip() for s in spec.split(","))


@dataclass(frozen=True)
class _Companion:
    stem: str
    why: str
    os: str | None  #: the OS the row is about; None for both


@once
def _companions() -> tuple[_Companion, ...]:
    return tuple(
        _Companion(row.text("stem"), row.text("why"), row.string("os", choices=("linux", "windows")))
        for row in _data.document(_FILE).rows("companion")
    )


def unprovided(name: str, os: OS, major: int | None, machine: str | None = None) -> str | None:
    """Why repair keeps library ``name`` (a copy's name) when :func:`provision` finds no NVIDIA wheel for it;
    None for a name that is no CUDA library (or the driver's: never a wheel's business) and for one that
    :func:`provision` finds. The reasons of ``[[companion]]`` in ``repair.toml`` first (NVRTC's builtins,
    NVTX on Windows), then CUDA 10, no version, no known wheel, none for the platform, several majors."""
    plain = unhashed(name, os)
    if _choose(_rows_for(plain, os, machine), major) is not None:
        return None  # provided: nothing to explain
    for companion in _companions():
        tail = "" if companion.stem.endswith("_") else r"[._]"  # a stem ending in _ is a prefix
        if companion.os in (None, os) and re.match(re.escape(companion.stem) + tail, plain, re.IGNORECASE):
            return companion.why
    found = identify(plain)
    if found is None or found.driver or found.os != os:
        return None
    rows = [
        r
        for r in provider_rows()
        if r.path(os) is not None and _is_copy_of(plain, posixpath.basename(r.path(os) or ""), os, r.copies)
    ]
    version = found.version
    if version is None:
        return f"{found.description}: the name carries no version, so no NVIDIA wheel can be matched to it"
    if not rows:
        head = cudart_major(plain) if found.component == "cudart" else None
        if head is not None and head < 11:
            return f"{found.description} of CUDA {head}: NVIDIA publishes no wheel for CUDA {head}"
        if os == "windows":
            return f"no NVIDIA Windows wheel is known to ship {plain} (repair_providers.toml)"
        return f"no NVIDIA wheel is known to ship {plain} (version {version} of {found.description})"
    if major is not None and not any(r.cuda == major for r in rows):
        others = ", ".join(str(m) for m in sorted({r.cuda for r in rows}))
        return f"no NVIDIA wheel for CUDA {major} ships {plain} (NVIDIA's wheels for CUDA {others} do)"
    if not any(r.claims(os, machine) for r in rows):
        where = f"{os}-{machine}" if machine else os
        return f"no NVIDIA wheel checked for {where} ships {plain}"
    return f"{plain} ships in NVIDIA wheels of several CUDA majors and the wheel's train names none"


def provided_names(major: int, os: OS) -> tuple[str, ...]:
    """Every library file name an NVIDIA wheel provides for CUDA ``major`` on ``os``, sorted (the rows of
    ``repair_providers.toml``: NVTX's DLL is not among them, NVIDIA's Windows NVTX wheels hold headers
    only)."""
    out = {posixpath.basename(r.path(os) or "") for r in provider_rows() if r.cuda == major and r.path(os)}
    return tuple(sorted(out, key=str.lower))


def nvidia_directories(major: int, os: OS) -> tuple[str, ...]:
    """Every site-packages directory NVIDIA's wheels install libraries into for CUDA ``major`` on ``os``."""
    return tuple(
        sorted(
            {posixpath.dirname(r.path(os) or "") for r in provider_rows() if r.cuda == major and r.path(os)}
        )
    )
