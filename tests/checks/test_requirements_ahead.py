"""The requirements' resolution overlaps the members' reading: it starts on a thread of its own as soon as the
dist-info is read, the audit takes its result, and the report is the one the old order (scan, then resolve)
gave. It starts only where the audit resolves the requirements anyway, and an error it meets is reported where
it was before."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from cudaship.checks import providers as checks_providers
from cudaship.checks.engine import AuditObserver, audit_scanned, audit_wheels
from cudaship.checks.table import default_policy, load_policy
from cudaship.config import ProjectConfig
from cudaship.errors import CudashipError
from cudaship.inspection.scan import scan as scan_wheel
from cudaship.providers.options import ProviderOptions
from cudaship.records.findings import Status
from tests.providers.conftest import make_wheel

TAG = "py3-none-manylinux_2_28_x86_64"


@pytest.fixture
def house(tmp_path: Path) -> Path:
    """A wheelhouse with the runtime the audited wheel requires."""
    out = tmp_path / "house"
    out.mkdir()
    make_wheel(
        out,
        "nvidia-cuda-runtime",
        "13.0.96",
        "py3-none-manylinux_2_17_x86_64",
        {"nvidia/cu13/lib/libcudart.so.13": b"\x7fELF"},
    )
    return out


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    files = {f"needs_cuda/part{i}.py": f"x = {i}\n".encode() * 50 for i in range(40)}
    return make_wheel(
        tmp_path,
        "needs-cuda",
        "1.0",
        TAG,
        {"needs_cuda/__init__.py": b"", **files},
        requires=("nvidia-cuda-runtime==13.0.96",),
    )


class _Calls:
    """closure_for, wrapped: each call's thread, and an event set when the first call begins."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail: Exception | None = None) -> None:
        self.threads: list[str] = []
        self.began = threading.Event()
        real = checks_providers.closure_for

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.threads.append(threading.current_thread().name)
            self.began.set()
            if fail is not None:
                raise fail
            return real(*args, **kwargs)

        monkeypatch.setattr(checks_providers, "closure_for", wrapped)


class _WaitsForTheResolution(AuditObserver):
    """Holds the scan at its first member until the resolution has begun: the old order (resolve after the
    scan) can never get past it, so the test fails there instead of passing by luck of timing."""

    def __init__(self, began: threading.Event) -> None:
        self.began = began
        self.seen_during_scan: list[bool] = []

    def advanced(self, nbytes: int) -> None:
        if not self.seen_during_scan:
            self.seen_during_scan.append(self.began.wait(timeout=60))


def test_the_resolution_runs_during_the_scan_and_the_report_is_unchanged(
    wheel: Path, house: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = ProviderOptions(find_links=(str(house),))
    # the old order, by hand: scan, then check with the requirements resolved when first needed
    before = audit_scanned(scan_wheel(wheel, workers=1), default_policy(), options)
    calls = _Calls(monkeypatch)
    hooks = _WaitsForTheResolution(calls.began)
    report = audit_wheels([wheel], default_policy(), observer=hooks, workers=1, providers=options)
    assert hooks.seen_during_scan == [True]
    assert calls.threads == ["cudaship-requirements"]  # once, on its own thread
    (audit,) = report.wheels
    line = next(n for n in audit.notes if n.startswith("providers:"))
    assert "wheelhouse" in line
    assert [(c.name, c.status) for c in audit.checks] == [(c.name, c.status) for c in before.checks]
    assert audit.notes == before.notes


def test_several_wheels_each_resolve_once(
    tmp_path: Path, house: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = [
        make_wheel(
            tmp_path,
            f"needs-cuda-{i}",
            "1.0",
            TAG,
            {f"needs_cuda_{i}/__init__.py": b""},
            requires=("nvidia-cuda-runtime==13.0.96",),
        )
        for i in range(3)
    ]
    calls = _Calls(monkeypatch)
    report = audit_wheels(
        wheels, default_policy(), workers=2, providers=ProviderOptions(find_links=(str(house),))
    )
    assert len(report.wheels) == 3 and not report.errors
    assert calls.threads == ["cudaship-requirements"] * 3


def test_no_resolution_when_the_closure_checks_do_not_run(
    wheel: Path, house: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _Calls(monkeypatch)
    policy = load_policy(ProjectConfig(data={"audit": {"skip": ["closure"]}}, source=None))
    report = audit_wheels([wheel], policy, workers=1, providers=ProviderOptions(find_links=(str(house),)))
    assert report.wheels and not report.errors
    assert calls.threads == []  # nothing in this wheel needed the providers, and nothing looked them up


def test_no_resolution_for_a_wheel_without_requirements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = make_wheel(tmp_path, "plain", "1.0", TAG, {"plain/__init__.py": b""})
    calls = _Calls(monkeypatch)
    report = audit_wheels([plain], default_policy(), workers=1)
    assert report.wheels and not report.errors
    assert calls.threads == []


def test_an_error_of_the_resolution_is_reported_as_before(
    wheel: Path, house: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = ProviderOptions(find_links=(str(house),))
    _Calls(monkeypatch, fail=CudashipError("the index said no"))
    old = audit_scanned(scan_wheel(wheel, workers=1), default_policy(), options)
    new = audit_wheels([wheel], default_policy(), workers=1, providers=options).wheels[0]
    failed = [c for c in new.checks if c.status is Status.FAIL and "the index said no" in c.reason]
    assert failed, [c.reason for c in new.checks]
    assert [(c.name, c.status, c.reason) for c in new.checks] == [
        (c.name, c.status, c.reason) for c in old.checks
    ]


def test_taken_only_for_the_wheel_platform_and_sources_it_was_started_for(
    wheel: Path, house: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cudaship.checks.providers import RequirementsAhead

    calls = _Calls(monkeypatch)
    dist = scan_wheel(wheel, workers=1).dist
    other_dist = scan_wheel(wheel, workers=1).dist  # equal, but another wheel's read
    platform = scan_wheel(wheel, workers=1).platform
    options = ProviderOptions(find_links=(str(house),))
    ahead = RequirementsAhead(options)
    assert ahead.take(dist, platform, options) is None  # not started
    ahead.start(dist, platform)
    windows = dataclasses.replace(platform, os="windows", machine="amd64")
    assert ahead.take(dist, windows, options) is None
    assert ahead.take(other_dist, platform, options) is None
    assert ahead.take(dist, platform, ProviderOptions(offline=True)) is None
    got = ahead.take(dist, platform, options)
    assert got is not None and got[0].reached  # the runtime, from the wheelhouse
    ahead.start(dist, platform)  # started once: a second start does nothing
    assert calls.threads == ["cudaship-requirements"]
