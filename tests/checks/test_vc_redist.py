"""The Visual C++ 2015-2022 redistributable's DLLs are system libraries on Windows (issue 21, class 8): a
mingw-built DLL importing ``VCRUNTIME140_THREADS.dll`` (C11 threads, VS 2022 17.8+) and
``MSVCP140_ATOMIC_WAIT.dll`` audits clean in a wheel that ships neither."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.checks.engine import audit_wheels
from cudaship.checks.table import default_policy
from cudaship.inspection.walk import inspect_file
from cudaship.knowledge.system_libraries import Provider, provider_of
from cudaship.records.findings import Status
from tests.fixtures.synthetic_wheels import write_wheel


@pytest.mark.parametrize(
    "name",
    [
        "VCRUNTIME140_THREADS.dll",
        "vcruntime140_1.dll",
        "MSVCP140_ATOMIC_WAIT.dll",
        "msvcp140_codecvt_ids.dll",
        "VCCORLIB140.dll",
        "vcamp140.dll",
        "mfc140u.dll",
        "concrt140.dll",
    ],
)
def test_redistributable_dlls_are_system_libraries(name: str) -> None:
    assert provider_of(name, "windows") is Provider.SYSTEM
    assert provider_of(name, "linux") is None


def test_debug_runtime_is_not_a_system_library() -> None:
    assert provider_of("vcruntime140d.dll", "windows") is None
    assert provider_of("msvcp140d.dll", "windows") is None


def test_dll_importing_the_threads_runtime_resolves(
    mingw_build: Callable[[str], Path], tmp_path: Path
) -> None:
    dll = mingw_build("threads_consumer.dll")
    report = inspect_file(dll, dll.name)
    assert report.host is not None
    assert {i.library for i in report.host.imports} >= {
        "VCRUNTIME140_THREADS.dll",
        "MSVCP140_ATOMIC_WAIT.dll",
    }
    wheel = write_wheel(
        tmp_path,
        name="threads_pkg",
        version="1.0",
        tag="py3-none-win_amd64",
        files={"threads_pkg/__init__.py": b"", "threads_pkg/threads_consumer.dll": dll.read_bytes()},
    )
    report_ = audit_wheels([wheel], default_policy())
    closure = {c.name: c for c in report_.checks if c.family == "closure"}
    own = closure["closure: threads_pkg/threads_consumer.dll"]
    assert own.status is Status.PASS, own.evidence
    assert "system" in own.reason
    assert report_.ok
