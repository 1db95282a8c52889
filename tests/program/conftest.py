"""Program fixtures: export directories made in the test session with the CPU (or CUDA) torch, when present.

torch is an optional extra: every fixture here skips cleanly when ``import torch`` fails. Exports take
20-70 s, so the CPU export is made once per session and copied for each test that changes it.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures import built_once, session_dir

HAS_TORCH = importlib.util.find_spec("torch") is not None


def torch_gpu() -> bool:
    if not HAS_TORCH:
        return False
    import torch

    return bool(torch.cuda.is_available())


@pytest.fixture(scope="session")
def cpu_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo-mlp exported for CPU by ``program export`` (read-only: copy it before changing it)."""
    if not HAS_TORCH:
        pytest.skip("torch is not installed (pip install 'cudaship[torch]')")
    if shutil.which("g++") is None:
        pytest.skip("AOTInductor needs a C++ compiler (g++) to export")
    from cudaship.program.export import export_program

    # exported once per test session, shared by pytest-xdist workers (an AOTInductor compile is slow)
    done = built_once(
        session_dir(tmp_path_factory) / "cpu-export",
        lambda work: export_program("demo-mlp", work / "demo", device="cpu"),
    )
    return done / "demo"


@pytest.fixture
def cpu_export_copy(cpu_export: Path, tmp_path: Path) -> Iterator[Path]:
    target = tmp_path / "copy"
    shutil.copytree(cpu_export, target)
    yield target
