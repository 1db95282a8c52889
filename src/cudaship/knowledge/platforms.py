"""Platform tags to (OS, machine): ``win_amd64``, ``manylinux_2_28_x86_64`` and ``macosx_14_0_arm64`` name an
operating system and a machine in the spellings of PEP 425 / the packaging platform-tag conventions."""

from __future__ import annotations

from cudaship.records.platform import TargetPlatform

_MACHINES = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "aarch64": "aarch64",
    "arm64": "aarch64",
    "i686": "x86",
    "i386": "x86",
    "win32": "x86",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "armv7l": "arm",
}


def platform_from_tag(platform_tag: str) -> TargetPlatform:
    """Map a platform tag (``win_amd64``, ``manylinux_2_28_x86_64``, ``macosx_14_0_arm64``) to OS and
    machine."""
    tag = platform_tag.lower()
    if tag == "any":
        return TargetPlatform("any", None, platform_tag)
    if tag == "win32":
        return TargetPlatform("windows", "x86", platform_tag)
    if tag.startswith("win_"):
        return TargetPlatform("windows", _MACHINES.get(tag[4:], tag[4:]), platform_tag)
    if tag.startswith("macosx_"):
        arch = tag.split("_")[-1]
        if arch == "universal2":
            return TargetPlatform("macos", None, platform_tag)
        return TargetPlatform("macos", _MACHINES.get(arch, arch), platform_tag)
    for prefix in ("manylinux", "musllinux", "linux"):
        if tag.startswith(prefix):
            for known, machine in _MACHINES.items():
                if tag.endswith("_" + known):
                    return TargetPlatform("linux", machine, platform_tag)
            return TargetPlatform("linux", tag.split("_")[-1], platform_tag)
    return TargetPlatform("other", None, platform_tag)
