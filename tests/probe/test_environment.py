"""probe/environment.py: the native files of the distributions installed in this interpreter's environment, or
in a site directory given, each with its distribution's name and version from its RECORD."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cudaship.probe.environment import installed_native_files


def test_environment_scan_finds_native_files_of_real_distributions() -> None:
    files = list(installed_native_files())
    names = {f.distribution.lower() for f in files}
    assert "zstandard" in names  # a dependency with a compiled extension
    assert all(f.path.is_absolute() and f.path.is_file() for f in files)
    assert len({f.path for f in files}) == len(files)


def test_environment_scan_of_a_site_dir(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> None:
    """A distribution whose RECORD lists a CUDA library is found, with its name and version."""
    lib = nvcc_build("multi_arch")
    package = tmp_path / "cudapkg"
    package.mkdir()
    (package / lib.name).write_bytes(lib.read_bytes())
    (package / "__init__.py").write_text("")
    info = tmp_path / "cudapkg-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cudapkg\nVersion: 1.2.3\n")
    (info / "RECORD").write_text(
        f"cudapkg/__init__.py,,\ncudapkg/{lib.name},,\ncudapkg-1.2.3.dist-info/RECORD,,\n"
    )
    found = list(installed_native_files(path=[str(tmp_path)]))
    assert [(f.distribution, f.version, f.path.name) for f in found] == [("cudapkg", "1.2.3", lib.name)]
