"""One corpus of hostile names, put into real inputs built here: what a report must print safely.

:data:`HOSTILE` holds what a name must never do to a terminal, a CI log or a rendered page: clear the
screen and set the window title (ANSI CSI and OSC, BEL), hide what came before (carriage return), forge a
line (line feed), start a GitHub Actions workflow command (``::error::``, ``::add-mask::`` at a line start;
``##[`` and ``##vso[`` anywhere), reverse the text (U+202E), act as an 8-bit CSI (U+009B), be markdown or
HTML syntax (a table pipe, backticks, a link to ``javascript:``, ``<img onerror>``) and end an XML CDATA
section. It holds no ``/``, ``-`` or NUL, so it fits a file name, a wheel's distribution name, a zip member
name, an ELF string and a PE string.

Builders (each a real file): :func:`hostile_elf` (gcc: SONAME, DT_NEEDED and RUNPATH hostile),
:func:`hostile_pe` (mingw: the imported DLL's name and an imported function's name hostile),
:func:`hostile_wheel` (member names, METADATA fields and the wheel's own file name hostile, holding the ELF,
the PE and a real nvcc library), :func:`hostile_pt2` (an AOTInductor package whose member names are
hostile), :func:`hostile_site` (a site-packages directory with the wheel installed, for ``doctor --env``).
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

HOSTILE = (
    "::error::pwn\x1b[2J\x1b[H\x1b]0;title\x07\rCR\n::add-mask::secret ##[error]legacy ##vso[task]x "
    "<img src=x onerror=alert(1)>|`tick`|[link](javascript:alert(1)) \u202eRLO \x9b31m ]]>&amp;\t\x7f"
)


def fit(length: int, start: str = "::") -> bytes:
    """Hostile bytes of exactly ``length`` (to patch a string in place): :data:`HOSTILE` from the first
    ``start``, repeated as needed."""
    text = HOSTILE[HOSTILE.index(start) :] + HOSTILE
    return (text.encode() * (1 + length // len(text)))[:length]


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is needed to build the hostile inputs")
    return found


def _run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]


def hostile_elf(directory: Path) -> Path:
    """A real shared library (gcc) whose SONAME, DT_NEEDED entry and RUNPATH are hostile."""
    gcc = _tool("gcc")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "needed.c").write_text("int needed_fn(void) { return 1; }\n")
    (directory / "main.c").write_text("int needed_fn(void);\nint entry(void) { return needed_fn(); }\n")
    needed = directory / "libneeded.so"
    _run(
        [
            gcc,
            "-shared",
            "-fPIC",
            "-o",
            str(needed),
            "needed.c",
            "-Xlinker",
            "-soname",
            "-Xlinker",
            f"libneeded{HOSTILE}.so.1",
        ],
        directory,
    )
    out = directory / "libhostile.so"
    _run(
        [
            gcc,
            "-shared",
            "-fPIC",
            "-o",
            str(out),
            "main.c",
            str(needed),
            "-Xlinker",
            "-soname",
            "-Xlinker",
            f"lib{HOSTILE}.so",
            "-Xlinker",
            "--enable-new-dtags",
            "-Xlinker",
            "-rpath",
            "-Xlinker",
            f"$ORIGIN/{HOSTILE}:/opt/{HOSTILE}",
        ],
        directory,
    )
    data = out.read_bytes()
    assert HOSTILE.encode() in data
    return out


def hostile_pe(directory: Path) -> Path:
    """A real DLL (mingw) whose import table names a hostile DLL and a hostile function (patched in place,
    same length)."""
    cc = _tool("x86_64-w64-mingw32-gcc")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "dll.c").write_text(
        "#include <windows.h>\n__declspec(dllexport) DWORD entry(void) { return GetTickCount(); }\n"
    )
    built = directory / "plain.dll"
    _run([cc, "-shared", "-o", str(built), "dll.c"], directory)
    data = built.read_bytes()
    for name, start in ((b"KERNEL32.dll", "\n::add"), (b"GetTickCount", "\x1b]0;")):
        assert name in data, name
        data = data.replace(name + b"\0", fit(len(name), start) + b"\0")
    out = directory / "hostile.dll"
    out.write_bytes(data)
    return out


def _dist_name() -> str:
    """The corpus as a distribution name in a wheel's file name (no ``-``, which separates its fields)."""
    return f"pwn{HOSTILE}".replace("-", "_")


def hostile_wheel(
    directory: Path,
    elf: Path,
    pe: Path,
    device_library: Path,
    *,
    name: str | None = None,
    hostile: str = HOSTILE,
) -> Path:
    """A wheel whose file name, member names and METADATA fields are hostile; it holds the hostile ELF, the
    hostile PE and a real nvcc library (under a hostile member name), so every report has device code,
    imports and findings to show. ``name``: a plain distribution name instead (for an installed
    environment, whose reader goes by the dist-info directory's name); ``hostile``: the names to use in member
    names."""
    directory.mkdir(parents=True, exist_ok=True)
    name = name or _dist_name()
    field = HOSTILE.replace("\n", " ").replace("\r", " ")  # a METADATA field is one line
    path = directory / f"{name}-1.0-py3-none-manylinux_2_17_x86_64.whl"
    dist = f"{name}-1.0.dist-info"
    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {name.replace(chr(10), ' ').replace(chr(13), ' ')}\n"
        "Version: 1.0\n"
        f"Summary: {field}\n"
        f"Home-page: https://example.invalid/{field}\n"
        f"Requires-Dist: nvidia-cuda-runtime-cu12 ; extra == '{field}'\n"
        "Requires-Dist: nvidia-cublas-cu12\n"
    )
    wheel = (
        "Wheel-Version: 1.0\nGenerator: cudaship-tests\nRoot-Is-Purelib: false\n"
        "Tag: py3-none-manylinux_2_17_x86_64\n"
    )
    members = {
        f"pwn/{hostile}/libhostile.so": elf.read_bytes(),
        f"pwn/lib{hostile}.so": device_library.read_bytes(),
        f"pwn/{hostile}.dll": pe.read_bytes(),
        f"pwn/{hostile}.py": b"import ctypes\n",
        f"{dist}/METADATA": metadata.encode(),
        f"{dist}/WHEEL": wheel.encode(),
    }
    # RECORD rows for the names without a line break (the others go unlisted: a finding that names them)
    listed = [n for n in members if "\n" not in n and "\r" not in n]
    record = "".join(f'"{n}",,\n' for n in listed) + f'"{dist}/RECORD",,\n'
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in members.items():
            z.writestr(member, data)
        z.writestr(f"{dist}/RECORD", record)
    return path


def hostile_pt2(directory: Path, elf: Path, cubin: Path) -> Path:
    """An AOTInductor package whose root, model and member names are hostile (the wrapper is the hostile
    ELF, the kernel a real nvcc cubin)."""
    from tests.program.builders import make_pt2

    directory.mkdir(parents=True, exist_ok=True)
    return make_pt2(directory / "model.pt2", elf, [cubin], root="model", model=f"m{HOSTILE}")


def hostile_site(directory: Path, wheel: Path) -> Path:
    """A site-packages directory with ``wheel`` installed (its RECORD lists the hostile paths)."""
    from tests.fixtures.envs import install_wheel

    site = directory / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    install_wheel(wheel, site)
    return site
