"""A refused archive during a reinstall leaves the toolkit that was there before, byte for byte, and no
staging directory. (Fresh installs with hostile archives, interrupted and killed installs and cut downloads
are in tests/toolkit/test_extract.py and tests/toolkit/test_install_redist.py.)"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from cudaship.errors import ToolkitError
from cudaship.toolkit import download
from cudaship.toolkit.install import InstallRequest, install, verify
from cudaship.toolkit.records import Platform, Source
from tests.security.builders import SYMLINK, M, tar_bytes
from tests.toolkit.builders import LINUX, VERSIONS, build_redist, top_dir

TOP = top_dir("cuda_cudart", LINUX, VERSIONS["cuda_cudart"])


def _request(dest: Path, mirror: Path, cache: Path) -> InstallRequest:
    return InstallRequest(
        release="13.0.2",
        platform=Platform.LINUX_X86_64,
        components=("cudart",),
        dest=dest,
        source=Source.REDIST,
        mirror=str(mirror),
        cache_dir=cache,
        fetch=download.FetchOptions(retries=0),
    )


def _tree(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        out[rel] = (
            "link:" + os.readlink(path)
            if path.is_symlink()
            else (path.read_bytes().hex() if path.is_file() else "dir")
        )
    return out


@pytest.mark.parametrize(
    ("archive", "message"),
    [
        pytest.param(
            tar_bytes([M(f"{TOP}/include/cuda.h"), M(f"{TOP}/include/CUDA.h")]),
            "differ only by case",
            id="case-collision",
        ),
        pytest.param(
            tar_bytes([M(f"{TOP}/lib/x", "../../../outside", SYMLINK)]), "points outside", id="symlink-escape"
        ),
        pytest.param(tar_bytes([M(f"{TOP}/lib/bomb.so", bytes(64 << 20))]), "zip bomb", id="bomb"),
        pytest.param(b"\xfd7zXZ\x00\x00 cut short", "not a readable tar archive", id="corrupt"),
    ],
)
def test_refused_reinstall_keeps_the_previous_toolkit(tmp_path: Path, archive: bytes, message: str) -> None:
    good = build_redist(tmp_path / "good", platforms=(LINUX,), components=("cuda_cudart",))
    dest = tmp_path / "toolkits" / "cuda"
    install(_request(dest, good.root, tmp_path / "cache"))
    before = _tree(dest)
    hostile = build_redist(
        tmp_path / "hostile",
        platforms=(LINUX,),
        components=("cuda_cudart",),
        overrides={("cuda_cudart", LINUX): archive},
    )
    # the manifest describes the hostile archive (its checksum matches): only extraction can refuse it
    manifest = hostile.manifest()
    entry = manifest["cuda_cudart"][LINUX]  # type: ignore[index]
    entry["sha256"] = hashlib.sha256(archive).hexdigest()
    entry["size"] = str(len(archive))
    hostile.write_manifest(manifest)
    with pytest.raises(ToolkitError, match=message) as info:
        install(_request(dest, hostile.root, tmp_path / "cache"))
    assert "\n" not in str(info.value)
    assert _tree(dest) == before
    assert sorted(p.name for p in dest.parent.iterdir() if "lock" not in p.name) == ["cuda"]
    assert verify(dest)[1] == []
