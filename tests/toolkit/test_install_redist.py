"""Installing from a redist tree served on 127.0.0.1: the happy path and every way it must fail safely."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cudaship.errors import ToolkitError
from cudaship.toolkit import download
from cudaship.toolkit.extract import ExtractLimits
from cudaship.toolkit.install import InstallRequest, install, read_toolkit, remove, verify
from cudaship.toolkit.records import TOOLKIT_MANIFEST, Observer, Platform, Source
from tests.toolkit.builders import COMPONENT_FILES, LINUX, WINDOWS, RedistTree, ServerControl, build_redist

DEFAULT = ("nvcc", "crt", "nvvm", "cudart", "cccl")


def _request(dest: Path, base: str, cache_dir: Path, **changes: object) -> InstallRequest:
    fields: dict[str, object] = {
        "release": "13.0.2",
        "platform": Platform.LINUX_X86_64,
        "components": DEFAULT,
        "dest": dest,
        "source": Source.REDIST,
        "mirror": base,
        "cache_dir": cache_dir,
        "fetch": download.FetchOptions(retries=2, backoff=0.01, timeout=10),
    }
    fields.update(changes)
    return InstallRequest(**fields)  # type: ignore[arg-type]


def _snapshot(root: Path) -> dict[str, bytes | str]:
    result: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            result[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            result[rel] = path.read_bytes()
    return result


def _leftovers(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}.") and "lock" not in p.name)


def test_linux_toolkit_from_http(tmp_path: Path, server: tuple[str, ServerControl], cache_dir: Path) -> None:
    base, control = server
    dest = tmp_path / "cuda"
    info = install(_request(dest, base, cache_dir))

    assert [c.component for c in info.components] == list(DEFAULT)
    for rel, data in COMPONENT_FILES["cuda_nvcc"][LINUX].items():
        if rel != "LICENSE":
            assert (dest / rel).read_bytes() == data
    assert (dest / "licenses" / "nvcc" / "LICENSE").read_bytes() == b"nvcc license\n"
    assert os.access(dest / "bin" / "nvcc", os.X_OK)
    assert not os.access(dest / "include" / "cuda_runtime.h", os.X_OK)
    assert os.readlink(dest / "lib64") == "lib"
    assert os.readlink(dest / "lib" / "libcudart.so") == "libcudart.so.13.0.96"
    recorded = json.loads((dest / TOOLKIT_MANIFEST).read_text())
    assert (
        recorded["release"] == "13.0.2" and recorded["platform"] == LINUX and recorded["source"] == "redist"
    )
    nvcc = next(c for c in recorded["components"] if c["component"] == "nvcc")
    archive = next(
        p for (n, plat), p in control_archives(control).items() if n == "cuda_nvcc" and plat == LINUX
    )
    assert nvcc["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert nvcc["version"] == "13.0.88"
    assert recorded["files"]["bin/nvcc"] == hashlib.sha256(b"#!/bin/sh\necho nvcc\n").hexdigest()
    _, problems = verify(dest)
    assert problems == []
    assert _leftovers(tmp_path, "cuda") == []


def control_archives(control: ServerControl) -> dict[tuple[str, str], Path]:
    found: dict[tuple[str, str], Path] = {}
    for path in control.root.rglob("*-archive.*"):
        name, platform = path.parent.parent.name, path.parent.name
        found[(name, platform)] = path
    return found


def test_windows_toolkit_puts_cuda13_dlls_in_bin_x64(
    tmp_path: Path, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, _ = server
    dest = tmp_path / "cuda-win"
    install(_request(dest, base, cache_dir, platform=Platform.WINDOWS_X86_64))
    assert (dest / "bin" / "x64" / "cudart64_13.dll").read_bytes() == b"MZ fake cudart dll\n"
    assert not (dest / "bin" / "cudart64_13.dll").exists()
    assert (dest / "bin" / "nvcc.exe").is_file()
    assert (dest / "lib" / "x64" / "cudart.lib").is_file()
    assert not (dest / "lib64").exists()
    assert read_toolkit(dest).platform is Platform.WINDOWS_X86_64


def test_local_directory_mirror_and_offline_cache(
    tmp_path: Path, redist: RedistTree, cache_dir: Path, server: tuple[str, ServerControl]
) -> None:
    install(_request(tmp_path / "from-dir", str(redist.root), cache_dir, components=("cudart",)))
    assert (tmp_path / "from-dir" / "include" / "cuda_runtime.h").is_file()
    base, control = server
    install(_request(tmp_path / "online", base, cache_dir, components=("cudart",)))
    served = len(control.requests)
    # --offline: the manifest and the archive come from the cache, the server is not asked
    install(
        _request(
            tmp_path / "offline",
            base,
            cache_dir,
            components=("cudart",),
            fetch=download.FetchOptions(offline=True),
        )
    )
    assert len(control.requests) == served
    assert _snapshot(tmp_path / "offline").keys() == _snapshot(tmp_path / "online").keys()


def test_offline_without_cache_fails(
    tmp_path: Path, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, control = server
    with pytest.raises(ToolkitError, match="not in the download cache"):
        install(_request(tmp_path / "cuda", base, cache_dir, fetch=download.FetchOptions(offline=True)))
    assert control.requests == []
    assert not (tmp_path / "cuda").exists()


def test_checksum_mismatch_extracts_nothing(
    tmp_path: Path, redist: RedistTree, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, _ = server
    manifest = redist.manifest()
    entry = manifest["cuda_crt"]
    assert isinstance(entry, dict)
    entry[LINUX]["sha256"] = hashlib.sha256(b"something else").hexdigest()
    redist.write_manifest(manifest)
    dest = tmp_path / "cuda"
    with pytest.raises(
        ToolkitError, match=r"cuda_crt-linux-x86_64-13\.0\.88-archive\.tar\.xz: checksum mismatch"
    ):
        install(_request(dest, base, cache_dir))
    assert not dest.exists()
    assert _leftovers(tmp_path, "cuda") == []
    assert not list((cache_dir / "blobs").rglob("*.part"))


def test_size_mismatch_is_refused(
    tmp_path: Path, redist: RedistTree, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, _ = server
    manifest = redist.manifest()
    entry = manifest["cuda_cudart"]
    assert isinstance(entry, dict)
    entry[LINUX]["size"] = str(int(entry[LINUX]["size"]) - 10)
    redist.write_manifest(manifest)
    with pytest.raises(ToolkitError, match="more than the"):
        install(_request(tmp_path / "cuda", base, cache_dir, components=("cudart",)))


@pytest.mark.parametrize(
    ("components", "platforms", "message"),
    [
        pytest.param(
            ("cudart",),
            (WINDOWS,),
            r"cuda_cudart has no archive for linux-x86_64 \(it has: windows-x86_64\)",
            id="platform-missing",
        ),
        pytest.param(("nvcc",), (LINUX,), r"no component cuda_nvcc \(for nvcc\)", id="component-missing"),
    ],
)
def test_component_missing(
    tmp_path: Path, cache_dir: Path, components: tuple[str, ...], platforms: tuple[str, ...], message: str
) -> None:
    built = ("cuda_cudart",)
    tree = build_redist(tmp_path / "redist", platforms=platforms, components=built)
    with pytest.raises(ToolkitError, match=message):
        install(_request(tmp_path / "cuda", str(tree.root), cache_dir, components=components))
    assert not (tmp_path / "cuda").exists()


def test_unknown_release_manifest_is_a_clear_error(
    tmp_path: Path, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, _ = server
    with pytest.raises(ToolkitError, match=r"redistrib_13\.2\.2\.json: HTTP 404"):
        install(_request(tmp_path / "cuda", base, cache_dir, release="13.2.2"))


def test_cut_connection_is_resumed(
    tmp_path: Path, redist: RedistTree, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, control = server
    archive = redist.archives[("cuda_cudart", LINUX)]
    control.cut_after[archive.name] = 100
    install(_request(tmp_path / "cuda", base, cache_dir, components=("cudart",)))
    ranges = [r for path, r in control.requests if path.endswith(archive.name)]
    assert ranges == [None, "bytes=100-"]
    assert (tmp_path / "cuda" / "lib" / "libcudart_static.a").read_bytes() == b"!<arch>\n"


def test_cut_connection_without_retries_keeps_the_part_for_the_next_run(
    tmp_path: Path, redist: RedistTree, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, control = server
    archive = redist.archives[("cuda_cudart", LINUX)]
    control.cut_after[archive.name] = 64
    with pytest.raises(ToolkitError, match="download failed after 1 attempt:"):
        install(
            _request(
                tmp_path / "cuda",
                base,
                cache_dir,
                components=("cudart",),
                fetch=download.FetchOptions(retries=0, backoff=0.01),
            )
        )
    parts = list((cache_dir / "blobs").rglob("*.part"))
    assert [p.stat().st_size for p in parts] == [64]
    assert not (tmp_path / "cuda").exists()
    install(_request(tmp_path / "cuda", base, cache_dir, components=("cudart",)))
    ranges = [r for path, r in control.requests if path.endswith(archive.name)]
    assert ranges == [None, "bytes=64-"]


def test_second_concurrent_install_is_blocked_by_the_lock(
    tmp_path: Path, redist: RedistTree, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, control = server
    archive = redist.archives[("cuda_cudart", LINUX)]
    release = threading.Event()
    control.hold[archive.name] = release
    dest = tmp_path / "cuda"
    outcome: list[object] = []

    def first() -> None:
        try:
            outcome.append(install(_request(dest, base, cache_dir, components=("cudart",))))
        except BaseException as e:  # reported below
            outcome.append(e)

    thread = threading.Thread(target=first)
    thread.start()
    deadline = time.monotonic() + 20
    while not any(p.endswith(archive.name) for p, _ in control.requests) and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(ToolkitError, match="holds the lock"):
        install(_request(dest, base, cache_dir, components=("cudart",)))
    release.set()
    thread.join(timeout=30)
    assert len(outcome) == 1 and not isinstance(outcome[0], BaseException), outcome
    assert (dest / TOOLKIT_MANIFEST).is_file()


class _InterruptAt(Observer):
    def __init__(self, word: str) -> None:
        self.word = word

    def stage(self, message: str) -> None:
        if message.startswith(self.word):
            raise KeyboardInterrupt


@pytest.mark.parametrize("stage", ["extracting", "moving"], ids=["during-extraction", "before-the-move"])
def test_interrupted_install_leaves_the_previous_toolkit(
    tmp_path: Path, server: tuple[str, ServerControl], cache_dir: Path, stage: str
) -> None:
    base, _ = server
    dest = tmp_path / "cuda"
    install(_request(dest, base, cache_dir, components=("cudart",)))
    before = _snapshot(dest)
    with pytest.raises(KeyboardInterrupt):
        install(_request(dest, base, cache_dir), _InterruptAt(stage))
    assert _snapshot(dest) == before
    assert _leftovers(tmp_path, "cuda") == []
    assert verify(dest)[1] == []


_KILL_SCRIPT = """
import sys, time
from pathlib import Path
from cudaship.toolkit import download
from cudaship.toolkit.install import InstallRequest, install
from cudaship.toolkit.records import Observer, Platform, Source

class Hang(Observer):
    def stage(self, message):
        if message.startswith("extracting"):
            Path(sys.argv[3]).write_text("extracting")
            time.sleep(120)

install(InstallRequest(release="13.0.2", platform=Platform.LINUX_X86_64,
                       components=("nvcc", "crt", "nvvm", "cudart", "cccl"), dest=Path(sys.argv[1]),
                       source=Source.REDIST, mirror=sys.argv[2], cache_dir=Path(sys.argv[4])), Hang())
"""


def test_killed_install_leaves_the_previous_toolkit_and_is_cleaned_up(
    tmp_path: Path, redist: RedistTree, cache_dir: Path
) -> None:
    dest = tmp_path / "cuda"
    install(_request(dest, str(redist.root), cache_dir, components=("cudart",)))
    before = _snapshot(dest)
    marker = tmp_path / "marker"
    child = subprocess.Popen(
        [sys.executable, "-c", _KILL_SCRIPT, str(dest), str(redist.root), str(marker), str(cache_dir)]
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), "the child never reached extraction"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert _snapshot(dest) == before
    assert any(".staging-" in name for name in _leftovers(tmp_path, "cuda"))  # what a SIGKILL leaves behind
    install(_request(dest, str(redist.root), cache_dir))  # the next run takes the lock and cleans it up
    assert _leftovers(tmp_path, "cuda") == []
    assert (dest / "bin" / "nvcc").is_file()


def test_oversized_expansion_through_install(
    tmp_path: Path, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, _ = server
    with pytest.raises(ToolkitError, match="expands"):
        install(_request(tmp_path / "cuda", base, cache_dir, limits=ExtractLimits(max_total_bytes=20)))
    assert not (tmp_path / "cuda").exists()
    assert _leftovers(tmp_path, "cuda") == []


def test_refuses_to_replace_a_foreign_directory(
    tmp_path: Path, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, _ = server
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    with pytest.raises(ToolkitError, match="not replacing it"):
        install(_request(dest, base, cache_dir))
    assert (dest / "notes.txt").read_text() == "keep me"


def test_reinstall_replaces_and_verify_remove(
    tmp_path: Path, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, _ = server
    dest = tmp_path / "cuda"
    install(_request(dest, base, cache_dir, components=("cudart",)))
    install(_request(dest, base, cache_dir, components=("nvcc", "cudart")))
    assert [c.component for c in read_toolkit(dest).components] == ["nvcc", "cudart"]
    (dest / "include" / "cuda_runtime.h").write_text("tampered")
    (dest / "bin" / "nvcc.profile").unlink()
    (dest / "stray.txt").write_text("x")
    _, problems = verify(dest)
    assert {(p.path, p.problem) for p in problems} == {
        ("include/cuda_runtime.h", "modified"),
        ("bin/nvcc.profile", "missing"),
        ("stray.txt", "unexpected"),
    }
    remove(dest)
    assert not dest.exists()
    assert _leftovers(tmp_path, "cuda") == []


def test_a_damaged_manifest_is_one_line_naming_the_key(
    tmp_path: Path, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, _ = server
    dest = tmp_path / "cuda"
    info = install(_request(dest, base, cache_dir, components=("cudart",)))
    assert read_toolkit(dest) == info  # what install wrote reads back as it was
    manifest = dest / TOOLKIT_MANIFEST
    good = json.loads(manifest.read_text())
    for damage, problem in (
        (lambda d: d["components"][0].update(source="ftp"), "components[0].source: must be one of redist, "),
        (lambda d: d["files"].update({"bin/nvcc": 7}), 'files."bin/nvcc": must be a string, not an integer'),
        (lambda d: d.pop("release"), "release: is required: a string"),
        (lambda d: d.update(schema=2), "schema: must be 1, not 2"),
    ):
        data = json.loads(json.dumps(good))
        damage(data)
        manifest.write_text(json.dumps(data))
        with pytest.raises(ToolkitError) as caught:
            read_toolkit(dest)
        assert str(caught.value).startswith(f"{dest}: {TOOLKIT_MANIFEST} is invalid: {problem}"), caught.value


def test_remove_refuses_a_directory_that_is_not_a_toolkit(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    with pytest.raises(ToolkitError, match="not a cudaship toolkit"):
        remove(tmp_path / "data")
    assert (tmp_path / "data").is_dir()


def test_manifest_traversal_in_relative_path_is_refused(
    tmp_path: Path, redist: RedistTree, cache_dir: Path
) -> None:
    manifest = redist.manifest()
    entry = manifest["cuda_cudart"]
    assert isinstance(entry, dict)
    entry[LINUX]["relative_path"] = "../../etc/passwd"
    redist.write_manifest(manifest)
    with pytest.raises(ToolkitError, match=r"relative_path: unsafe member '\.\./\.\./etc/passwd'"):
        install(_request(tmp_path / "cuda", str(redist.root), cache_dir, components=("cudart",)))
