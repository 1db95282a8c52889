"""The reader of what a package's Python code loads itself (cudaship.wheel.pyloads): calls, their mechanism
as written and their line, strings and dotted names; bounded (large files, files without a loading call and
files that only define a loader are not read; a file that is not valid Python is read all the same)."""

from __future__ import annotations

from cudaship.wheel.pyloads import MAX_LIST, MAX_SOURCE, library_list, python_loads

SOURCE = b"""\
import ctypes, os
import nvidia.cublas

def _load():
    lib = os.path.join(os.path.dirname(nvidia.cublas.__file__), "lib", "libcublas.so.12")
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    ctypes.cdll.LoadLibrary("libfoo.so.1")
    os.add_dll_directory(os.path.join(os.path.dirname(__file__), "..", "pkg.libs"))
    import librmm
    librmm.load_library()
"""


def test_loading_calls_are_read_with_their_mechanism_and_line() -> None:
    loads = python_loads("pkg/__init__.py", SOURCE)
    assert loads is not None
    got = [(c.line, c.kind, c.mechanism, c.scope) for c in loads.calls]
    assert got == [
        (6, "dlopen", "ctypes.CDLL(..., RTLD_GLOBAL)", ()),
        (7, "dlopen", "ctypes.cdll.LoadLibrary(...)", ()),
        (8, "directory", "os.add_dll_directory(...)", ()),
        (10, "helper", "librmm.load_library()", ("librmm",)),
    ]
    assert {"libcublas.so.12", "lib", "libfoo.so.1", "pkg.libs"} <= set(loads.strings)
    assert {"nvidia", "cublas"} <= set(loads.dotted)


def test_files_without_a_loading_call_or_too_large_are_not_read() -> None:
    assert python_loads("pkg/a.py", b"import os\nprint('hello')\n") is None
    # a definition is not a call; a file that is not valid Python (or not UTF-8) is read without an exception
    assert python_loads("pkg/b.py", b"def load_library(path):\n    pass\n") is None
    broken = python_loads("pkg/c.py", b"\xff\xfe ctypes.CDLL('libx.so' \n")
    assert broken is not None and broken.strings == ("libx.so",)
    big = b"import ctypes\nctypes.CDLL('libx.so')\n" + b"#" * MAX_SOURCE
    assert python_loads("pkg/d.py", big) is None


def test_a_shipped_list_gives_its_library_names() -> None:
    found = library_list("pkg/preload.json", b'["libcudart.so.12", "libcublas.so.12", "cudnn64_9.dll", "x"]')
    assert found is not None and found.names == ("libcudart.so.12", "libcublas.so.12", "cudnn64_9.dll")
    assert library_list("pkg/readme.txt", b"no libraries here") is None
    assert library_list("pkg/huge.json", b"libx.so " * MAX_LIST) is None


def test_a_dll_directory_call_keeps_the_strings_near_it() -> None:
    """``os.add_dll_directory`` keeps the string literals of its arguments and of the 16 lines before it
    (where ``os.path.join(..., "cccl")`` builds the directory), not those far from it."""
    source = (
        b'import os\nFAR = "headers"\n'
        + b"\n" * 20
        + b'dll_dir = os.path.join(os.path.dirname(spec.origin), "cccl")\n'
        + b'os.add_dll_directory(dll_dir if dll_dir else "fallback")\n'
    )
    loads = python_loads("pkg/_bindings.py", source)
    assert loads is not None
    (call,) = loads.calls
    assert (call.kind, call.line) == ("directory", 24)
    assert set(call.near) == {"cccl", "fallback"}
    assert "headers" in loads.strings
