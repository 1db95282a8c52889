"""layout.env_vars: only what exists in the toolkit is exported (issue 35, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaship.toolkit import layout
from cudaship.toolkit.records import Platform


def _tree(root: Path, files: tuple[str, ...]) -> Path:
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    root.mkdir(parents=True, exist_ok=True)
    return root


@pytest.mark.parametrize(
    ("platform", "files", "bins", "cudacxx", "notes"),
    [
        pytest.param(Platform.LINUX_X86_64, ("bin/nvcc",), ("bin",), "bin/nvcc", (), id="linux-nvcc"),
        pytest.param(
            Platform.LINUX_X86_64,
            ("lib/libcudart.so.13",),
            (),
            None,
            ("PATH", "CUDACXX"),
            id="no-bin",
        ),
        pytest.param(Platform.LINUX_X86_64, ("bin/ptxas",), ("bin",), None, ("CUDACXX",), id="only-ptxas"),
        pytest.param(
            Platform.WINDOWS_X86_64,
            ("bin/nvcc.exe", "bin/x64/cudart64_13.dll"),
            ("bin", "bin/x64"),
            "bin/nvcc.exe",
            (),
            id="windows-13",
        ),
        # a Windows toolkit holding a Linux-named nvcc: CUDACXX would name a nvcc.exe that is not there
        pytest.param(
            Platform.WINDOWS_X86_64, ("bin/nvcc",), ("bin",), None, ("CUDACXX",), id="windows-no-exe"
        ),
    ],
)
def test_env_vars_export_only_what_exists(
    tmp_path: Path,
    platform: Platform,
    files: tuple[str, ...],
    bins: tuple[str, ...],
    cudacxx: str | None,
    notes: tuple[str, ...],
) -> None:
    root = _tree(tmp_path / "tk", files)
    variables, got_bins, got_notes = layout.env_vars(root, platform)
    assert got_bins == [str(root / b) for b in bins]
    assert all(Path(b).is_dir() for b in got_bins)
    assert variables.get("CUDACXX") == (str(root / cudacxx) if cudacxx else None)
    assert tuple(n.split(":", 1)[0] for n in got_notes) == notes  # what was left out, each once
    assert all("does not exist" in n for n in got_notes)
