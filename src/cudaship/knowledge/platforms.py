"""The one platform table (``data/platforms.toml``): operating systems and machines in cudaship's spelling,
and how platform tags (PEP 425/600/656), PEP 508 markers, ``platform.machine()``/``sys.platform`` and NVIDIA's
redist manifests spell them. Every layer asks these functions; none keeps its own list."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data
from cudaship.once import once
from cudaship.records.platform import TargetPlatform

_FILE = "platforms.toml"


@dataclass(frozen=True)
class MachineRow:
    name: str  #: cudaship's spelling (``x86_64``)
    tags: tuple[str, ...]  #: its spellings at the end of a platform tag (``amd64``)
    aliases: tuple[str, ...]  #: other accepted spellings (``x64``, ``sbsa``)
    python: dict[str, str]  #: ``platform.machine()`` per OS where it is not ``name``
    cuda: bool  #: NVIDIA ships CUDA for it


@dataclass(frozen=True)
class SystemRow:
    name: str  #: ``linux``, ``windows``, ``macos``
    sys_platform: str
    os_name: str
    platform_system: str


@dataclass(frozen=True)
class CudaPlatform:
    """A platform NVIDIA builds CUDA for."""

    os: str
    machine: str
    redist: str  #: the key of NVIDIA's redist manifests (``linux-sbsa``)
    pip_tags: tuple[str, ...]  #: wheel platform tags pip may pick for it, newest first

    @property
    def name(self) -> str:
        return platform_name(self.os, self.machine)


@once
def machines() -> tuple[MachineRow, ...]:
    out = []
    for name, row in _data.section(_FILE, "machines").tables():
        python = row.sub("python")
        out.append(
            MachineRow(
                name=name,
                tags=row.strings("tags", single=False),
                aliases=row.strings("aliases", single=False),
                python={k: python.text(k) for k in python} if python is not None else {},
                cuda=row.boolean("cuda", False),
            )
        )
    return tuple(out)


@once
def systems() -> tuple[SystemRow, ...]:
    return tuple(
        SystemRow(
            name=name,
            sys_platform=row.text("sys_platform"),
            os_name=row.text("os_name"),
            platform_system=row.text("platform_system"),
        )
        for name, row in _data.section(_FILE, "systems").tables()
    )


@once
def cuda_platforms() -> tuple[CudaPlatform, ...]:
    """The platforms NVIDIA builds CUDA for (Linux x86_64 and aarch64/SBSA, Windows x86_64), in order."""
    return tuple(
        CudaPlatform(
            os=row.text("os"),
            machine=row.text("machine"),
            redist=row.text("redist"),
            pip_tags=row.strings("pip_tags", single=False),
        )
        for row in _data.document(_FILE).rows("cuda")
    )


def platform_name(os: str, machine: str) -> str:
    """cudaship's name of a platform: ``linux-x86_64``."""
    return f"{os}-{machine}"


# --- machines ---------------------------------------------------------------------------------------------


@once
def _tag_machines() -> dict[str, str]:
    return {tag: m.name for m in machines() for tag in m.tags}


@once
def _spellings() -> dict[str, str]:
    out = {m.name: m.name for m in machines()}
    for m in machines():
        for spelling in (*m.tags, *m.aliases, *(v.lower() for v in m.python.values())):
            out.setdefault(spelling, m.name)
    return out


def machine_of(spelling: str) -> str:
    """Any spelling of a machine (``AMD64`` from ``platform.machine()``, ``arm64``, ``x64``) in cudaship's
    (``x86_64``, ``aarch64``); one the table does not know, lower-cased."""
    key = spelling.strip().lower()
    return _spellings().get(key, key)


def cuda_machines() -> tuple[str, ...]:
    """The machines NVIDIA ships CUDA for: ``("x86_64", "aarch64")``."""
    return tuple(m.name for m in machines() if m.cuda)


def normalize_machine(machine: object) -> str:
    """A CUDA machine's spelling (``AMD64``, ``x64``, ``arm64``, ``sbsa``) as the key of the arch tables
    (``x86_64``, ``aarch64``); any other is a KnowledgeError."""
    key = str(getattr(machine, "value", machine)).strip().lower()
    name = _spellings().get(key)
    if name is None or name not in cuda_machines():
        raise KnowledgeError(f"unknown machine {machine!r} (known: {', '.join(cuda_machines())})")
    return name


def python_machine(os: str, machine: str) -> str:
    """``platform.machine()`` (the PEP 508 ``platform_machine``) on ``os`` for ``machine``: ``AMD64`` on
    Windows x86_64, ``arm64`` on macOS aarch64."""
    for m in machines():
        if m.name == machine:
            return m.python.get(os, machine)
    return machine


# --- operating systems -------------------------------------------------------------------------------------


def os_names() -> tuple[str, ...]:
    """``("linux", "windows", "macos")``."""
    return tuple(s.name for s in systems())


def cuda_os_names() -> tuple[str, ...]:
    """The operating systems NVIDIA builds CUDA for: ``("linux", "windows")``."""
    return tuple(dict.fromkeys(p.os for p in cuda_platforms()))


def os_of(sys_platform: str) -> str:
    """``sys.platform`` (``linux``, ``win32``, ``darwin``) as cudaship names the OS; another, unchanged."""
    if sys_platform.startswith("linux"):
        return "linux"
    for s in systems():
        if s.sys_platform == sys_platform:
            return s.name
    return sys_platform


def marker_values(os: str, machine: str | None) -> dict[str, str]:
    """The PEP 508 marker values that name the platform (``os_name``, ``sys_platform``, ``platform_system``,
    ``platform_machine``) on ``os``/``machine``; an OS the table does not know gives its own name."""
    for s in systems():
        if s.name == os:
            values = {
                "os_name": s.os_name,
                "sys_platform": s.sys_platform,
                "platform_system": s.platform_system,
            }
            break
    else:
        values = {"os_name": "", "sys_platform": os, "platform_system": os}
    values["platform_machine"] = python_machine(os, machine) if machine else ""
    return values


# --- CUDA platforms ---------------------------------------------------------------------------------------


def platform_names() -> dict[str, tuple[str, str]]:
    """Every accepted name of a CUDA platform -> (os, machine): cudaship's (``linux-aarch64``) and NVIDIA's
    redist key (``linux-sbsa``)."""
    out: dict[str, tuple[str, str]] = {}
    for p in cuda_platforms():
        out.setdefault(p.name, (p.os, p.machine))
        out.setdefault(p.redist, (p.os, p.machine))
    return out


def redist_platform(key: str) -> CudaPlatform:
    """The CUDA platform of a redist key (``linux-sbsa``)."""
    for p in cuda_platforms():
        if p.redist == key:
            return p
    raise KnowledgeError(f"unknown redist platform {key!r} (known: {', '.join(redist_keys())})")


def redist_keys() -> tuple[str, ...]:
    return tuple(p.redist for p in cuda_platforms())


def cuda_platform_for(os: str, machine: str) -> CudaPlatform:
    """The CUDA platform closest to ``os``/``machine``: the same, else the first of the same OS, else the
    first of the same machine, else the first (a toolkit for a machine CUDA does not ship for)."""
    candidates = cuda_platforms()
    for keep in (
        lambda p: (p.os, p.machine) == (os, machine),
        lambda p: p.os == os,
        lambda p: p.machine == machine,
    ):
        for p in candidates:
            if keep(p):
                return p
    return candidates[0]


# --- platform tags ----------------------------------------------------------------------------------------


def platforms_of_tags(tags: Iterable[str]) -> tuple[TargetPlatform, ...]:
    """The distinct platforms of wheel tags (``py3-none-manylinux_2_28_x86_64``), in their order."""
    seen: dict[str, TargetPlatform] = {}
    for tag in tags:
        platform = platform_from_tag(tag.rsplit("-", 1)[-1])
        seen.setdefault(platform.label, platform)
    return tuple(seen.values())


def platform_from_tag(platform_tag: str) -> TargetPlatform:
    """Map a platform tag (``win_amd64``, ``manylinux_2_28_x86_64``, ``macosx_14_0_arm64``) to OS and
    machine. The grammar is PEP 425's (``win32``, ``win_<arch>``, ``linux_<arch>``), PEP 600's
    (``manylinux_<x>_<y>_<arch>``), PEP 656's (``musllinux_<x>_<y>_<arch>``) and packaging's
    (``macosx_<x>_<y>_<arch>``); the machines are the table's."""
    tag = platform_tag.lower()
    known = _tag_machines()
    if tag == "any":
        return TargetPlatform("any", None, platform_tag)
    if tag == "win32":
        return TargetPlatform("windows", known[tag], platform_tag)
    if tag.startswith("win_"):
        return TargetPlatform("windows", known.get(tag[4:], tag[4:]), platform_tag)
    if tag.startswith("macosx_"):
        arch = tag.split("_")[-1]
        if arch == "universal2":
            return TargetPlatform("macos", None, platform_tag)
        return TargetPlatform("macos", known.get(arch, arch), platform_tag)
    if tag.startswith(("manylinux", "musllinux", "linux")):
        for spelling, machine in known.items():
            if tag.endswith("_" + spelling):
                return TargetPlatform("linux", machine, platform_tag)
        return TargetPlatform("linux", tag.split("_")[-1], platform_tag)
    return TargetPlatform("other", None, platform_tag)
