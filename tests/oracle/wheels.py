"""The oracle tests' wheels: a package whose ``__init__.py`` preloads a library with ctypes, libraries with
and without RUNPATH/RPATH, one whose DT_NEEDED nothing provides, one that segfaults in its constructor, one
that hangs there, and a requirement (a local wheel) that provides a library through RUNPATH."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.oracle.builders import CONSTRUCTOR_HANG, CONSTRUCTOR_SEGV, build_so, build_wheel, function

PRELOAD_INIT = """import ctypes, os
_here = os.path.dirname(__file__)
# the package's own preloading: _ext needs libhelper.so.1 and has no RUNPATH to it
ctypes.CDLL(os.path.join(_here, "lib", "libhelper.so.1"), mode=ctypes.RTLD_GLOBAL)
"""


@dataclass(frozen=True)
class Built:
    wheel: Path  #: preloadpkg
    wheelhouse: Path  #: holds deppkg (the requirement)


def build(root: Path, *, hang: bool = True, segv: bool = True) -> Built:
    libs = root / "libs"
    dep = build_so(libs / "deppkg" / "lib" / "libdep.so.2", function("dep_fn"), soname="libdep.so.2")
    helper = build_so(
        libs / "preloadpkg" / "lib" / "libhelper.so.1", function("helper_fn"), soname="libhelper.so.1"
    )
    gone = build_so(libs / "gone" / "libnothere.so.7", function("gone_fn"), soname="libnothere.so.7")
    pkg = libs / "preloadpkg"
    files: dict[str, bytes | Path] = {
        "preloadpkg/__init__.py": PRELOAD_INIT.encode(),
        "preloadpkg/lib/libhelper.so.1": helper,
        "preloadpkg/_ext.so": build_so(
            pkg / "_ext.so", function("ext_fn", ["helper_fn"]), soname="_ext.so", link=[helper]
        ),
        "preloadpkg/lib/libuser.so": build_so(
            pkg / "lib" / "libuser.so",
            function("user_fn", ["helper_fn"]),
            soname="libuser.so",
            link=[helper],
            runpath=["$ORIGIN"],
        ),
        "preloadpkg/lib/librpath.so": build_so(
            pkg / "lib" / "librpath.so",
            function("rpath_fn", ["helper_fn"]),
            soname="librpath.so",
            link=[helper],
            rpath=["$ORIGIN"],
        ),
        "preloadpkg/lib/libusesdep.so": build_so(
            pkg / "lib" / "libusesdep.so",
            function("usesdep_fn", ["dep_fn"]),
            soname="libusesdep.so",
            link=[dep],
            runpath=["$ORIGIN/../../deppkg/lib"],
        ),
        "preloadpkg/lib/libmissing.so": build_so(
            pkg / "lib" / "libmissing.so",
            function("missing_fn", ["gone_fn"]),
            soname="libmissing.so",
            link=[gone],
        ),
    }
    if segv:
        files["preloadpkg/lib/libsegv.so"] = build_so(
            pkg / "lib" / "libsegv.so", CONSTRUCTOR_SEGV, soname="libsegv.so"
        )
    if hang:
        files["preloadpkg/lib/libhang.so"] = build_so(
            pkg / "lib" / "libhang.so", CONSTRUCTOR_HANG, soname="libhang.so"
        )
    house = root / "wheelhouse"
    build_wheel(
        house,
        "deppkg",
        "1.0",
        {"deppkg/__init__.py": b"", "deppkg/lib/libdep.so.2": dep},
        top_level=["deppkg"],
    )
    wheel = build_wheel(
        root / "dist", "preloadpkg", "1.0", files, requires=["deppkg>=1"], top_level=["preloadpkg"]
    )
    return Built(wheel, house)
