"""Class 5 of issue 25: a library with 3,000 DT_NEEDED and 3,000 DT_RUNPATH entries (a real ELF, linked by
gcc, 140 KB) made the closure check try every import in every directory: 9 million probes, 20 s of CPU and
234 MiB, and ``doctor --env`` 71 s and 400 MiB writing 96 MB of "searched:" lists. Resolution now places a
name on the search path from the files of that name (audit) or from each directory listed once (``doctor
--env``): the work is counted, and bounded by the number of imports plus the number of directories, never
their product; the messages name a few directories and count the rest."""

from __future__ import annotations

import json
import shutil
import subprocess
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cudaship.checks import environment as env_checks
from cudaship.checks import resolve as resolve_module
from cudaship.cli.main import main

N = 3000
#: shipped beside the library, deep in its RUNPATH: the search must still find them, in the right directory
FOUND = {"libs00001.so": f"d{N - 1}", "libs00002.so": "d5"}


@pytest.fixture(scope="module")
def hostile_library(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(libbig.so with N DT_NEEDED and an N-entry DT_RUNPATH, one stub library to ship)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to link the hostile library")
    work = tmp_path_factory.mktemp("quadratic")
    stubs = work / "stubs"
    stubs.mkdir()
    (work / "stub.c").write_text("int stub_fn(void) { return 0; }\n")
    first = stubs / "libs00000.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(first), "-Wl,-soname,libs00000.so", str(work / "stub.c")],
        check=True,
    )
    base = first.read_bytes()
    for i in range(1, N):  # same length names: the SONAME is patched in place
        (stubs / f"libs{i:05d}.so").write_bytes(base.replace(b"libs00000", f"libs{i:05d}".encode()))
    (work / "big.c").write_text("int big_fn(void) { return 1; }\n")
    runpath = ":".join(f"$ORIGIN/d{i}" for i in range(N))
    subprocess.run(
        [
            "gcc", "-shared", "-fPIC", "-o", str(work / "libbig.so"), str(work / "big.c"),
            "-Wl,--no-as-needed", "-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}", f"-L{stubs}",
            *(f"-l:libs{i:05d}.so" for i in range(N)),
        ],
        check=True,
    )  # fmt: skip
    return work / "libbig.so", first


def _wheel(tmp_path: Path, lib: Path, stub: Path) -> Path:
    wheel = tmp_path / "big-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: big\nVersion: 1.0\n")
        zf.writestr(
            "big-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n",
        )
        zf.write(lib, "big/libbig.so")
        for name, directory in FOUND.items():
            zf.writestr(f"big/{directory}/{name}", stub.read_bytes().replace(b"libs00000", name[:9].encode()))
        zf.writestr("big-1.0.dist-info/RECORD", "")
    return wheel


def test_audit_resolution_work_is_linear(
    hostile_library: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    contexts: list[Any] = []
    original = resolve_module.search_path

    def spy(ctx: Any, path: str, report: Any) -> Any:
        contexts.append(ctx)
        return original(ctx, path, report)

    monkeypatch.setattr(resolve_module, "search_path", spy)
    wheel = _wheel(tmp_path, *hostile_library)
    tracemalloc.start()
    try:
        code = main(["audit", "--offline", "--format", "json", str(wheel)])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out = capsys.readouterr().out
    assert code == 1
    ctx = contexts[0]
    assert all(c is ctx for c in contexts)
    # counted: each import costs the files of its name, the search path is placed once: k x (needed + runpath)
    assert 0 < ctx.resolve_probes <= 2 * (N + N)
    assert peak < 96 << 20
    evidence = [
        e for c in json.loads(out)["checks"] if c["name"] == "closure: big/libbig.so" for e in c["evidence"]
    ]
    assert len(evidence) == N - len(FOUND)  # every other import is unresolved, each said once
    assert all("and 2992 more)" in e["message"] for e in evidence)
    assert len(out) < N * 1000  # a few directories named per message, the rest counted
    assert not any(name in e["message"] for e in evidence for name in FOUND)


def test_audit_still_finds_deep_runpath_entries(
    hostile_library: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _wheel(tmp_path, *hostile_library)
    main(["audit", "--offline", "--verbose", str(wheel)])
    out = capsys.readouterr().out
    assert "libs00001.so does not resolve" not in out and "libs00002.so does not resolve" not in out
    assert "libs00003.so does not resolve" in out


def test_doctor_env_search_lists_each_directory_once(
    hostile_library: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lib, stub = hostile_library
    site = tmp_path / "site-packages"
    (site / "big").mkdir(parents=True)
    shutil.copy(lib, site / "big" / "libbig.so")
    record = ["big/libbig.so,,"]
    for name, directory in FOUND.items():
        (site / "big" / directory).mkdir()
        (site / "big" / directory / name).write_bytes(
            stub.read_bytes().replace(b"libs00000", name[:9].encode())
        )
        record.append(f"big/{directory}/{name},,")
    info = site / "big-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: big\nVersion: 1.0\n")
    (info / "RECORD").write_text("\n".join(record) + "\n")
    graphs: list[Any] = []
    original = env_checks.check_environment

    def spy(env: Any, graph: Any) -> Any:
        graphs.append(graph)
        return original(env, graph)

    monkeypatch.setattr(env_checks, "check_environment", spy)
    code = main(["doctor", "--env", str(site), "--format", "json", "--no-system"])
    out = capsys.readouterr().out
    assert code in (0, 1)
    listings, probes = graphs[0].search_work
    assert listings <= N + 16  # each RUNPATH directory listed once, whatever the number of imports
    assert probes <= len(FOUND) * 2  # only where a name is listed is a file probed
    edges = {e.name: e for e in graphs[0].edges if e.importer.endswith("libbig.so")}
    assert edges["libs00001.so"].target == str(site / "big" / FOUND["libs00001.so"] / "libs00001.so")
    assert edges["libs00002.so"].target == str(site / "big" / "d5" / "libs00002.so")
    findings = [f for f in json.loads(out)["findings"] if f["rule"] == "unresolved"]
    assert len(findings) == N - len(FOUND)
    assert all("more)" in f["message"] and len(f["message"]) < 1000 for f in findings)
