"""``cudaship cmake`` through cudaship.cli.main.main: formats, files, toolkit checks, errors."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import jsonschema
import pytest

from cudaship.cli.main import main

SCHEMAS = Path(__file__).resolve().parents[2] / "src" / "cudaship" / "render" / "schemas"


def validate(data: object, name: str) -> None:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(data)


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("CUDACXX", "CUDAFLAGS", "CUDA_HOME", "CUDA_PATH", "CUDASHIP_TOOLKIT"):
        monkeypatch.delenv(var, raising=False)


def toolkit_dir(root: Path, cuda_version: int) -> Path:
    """A toolkit tree whose release is read from include/cuda.h (e.g. a Windows toolkit on a Linux host): its
    compilers are there (`cmake` refuses to point CMAKE_CUDA_COMPILER at nothing) but print no release."""
    (root / "include").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "include" / "cuda.h").write_text(f"#define CUDA_VERSION {cuda_version}\n")
    for name in ("nvcc", "nvcc.exe"):
        (root / "bin" / name).write_text("#!/bin/sh\nexit 1\n")
        (root / "bin" / name).chmod(0o755)
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_windows_json_from_toolkit_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tk = toolkit_dir(tmp_path / "cuda-13.2", 13020)
    code, out, err = run(
        capsys,
        "cmake",
        "--train",
        "cu132",
        "--platform",
        "windows-x86_64",
        "--toolkit",
        str(tk),
        "--cxx-standard",
        "20",
        "--format",
        "json",
    )
    assert code == 0, err
    data = json.loads(out)
    validate(data, "cmake")
    assert data["toolkit"] == {
        "root": tk.as_posix(),
        "source": "--toolkit",
        "nvcc": None,
        "release": "13.2",
        "release_from": "cuda.h",
        "cudaship_toolkit": False,
    }
    assert data["cache"]["CMAKE_CUDA_FLAGS"]["value"] == "-Xcompiler=/Zc:preprocessor"
    assert data["cache"]["CMAKE_CUDA_STANDARD"]["value"] == "20"
    assert data["generator"] in ("Ninja Multi-Config", "Visual Studio 17 2022")
    decided = {d["key"] for d in data["decisions"]}
    assert set(data["cache"]) <= decided
    assert f"toolkit {tk.as_posix()} from --toolkit: CUDA 13.2 (cuda.h)" in err


def test_args_from_cuda_home(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tk = toolkit_dir(tmp_path / "cuda", 13000)
    monkeypatch.setenv("CUDA_HOME", str(tk))
    code, out, _ = run(capsys, "cmake", "--train", "13.0", "--platform", "linux-aarch64")
    assert code == 0
    args = shlex.split(out)
    assert args[0] == "-G"
    defines = dict(a.removeprefix("-D").split("=", 1) for a in args if a.startswith("-D"))
    assert defines["CMAKE_CUDA_COMPILER:FILEPATH"] == f"{tk.as_posix()}/bin/nvcc"
    assert defines["CMAKE_CUDA_ARCHITECTURES:STRING"] == "80-real;90-real;100-real;110-real;120"


def test_cudacxx_not_overridden(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDACXX", "/opt/cuda/bin/nvcc -allow-unsupported-compiler")
    tk = toolkit_dir(tmp_path / "cuda", 13000)
    code, out, _ = run(
        capsys, "cmake", "--train", "cu130", "--platform", "linux-x86_64", "--toolkit", str(tk)
    )
    assert code == 0
    assert "CMAKE_CUDA_COMPILER" not in out


def test_write_initial_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tk = toolkit_dir(tmp_path / "cuda", 13020)
    code, out, err = run(
        capsys,
        "cmake",
        "--train",
        "cu132",
        "--platform",
        "windows-x86_64",
        "--toolkit",
        str(tk),
        "--write",
        "initial-cache",
        "init.cmake",
    )
    assert code == 0 and out == ""
    text = (tmp_path / "init.cmake").read_text()
    assert text.startswith("# cudaship cmake: CUDA train cu132 (CUDA 13.2) for windows-x86_64")
    assert 'set(CMAKE_CUDA_FLAGS "-Xcompiler=/Zc:preprocessor" CACHE STRING' in text
    assert "wrote init.cmake: cmake -C init.cmake -G" in err


@pytest.mark.parametrize(
    ("argv", "cuda_h", "code", "message"),
    [
        pytest.param(
            ["--train", "cu132"],
            13000,
            2,
            "is CUDA 13.0 (cuda.h), but train cu132 needs CUDA 13.2",
            id="toolkit-not-the-train",
        ),
        pytest.param(
            ["--train", "cu999"], 13000, 4, "--train 'cu999': unknown CUDA train 99.9", id="unknown-train"
        ),
        pytest.param(["--train", "cuda"], 13000, 4, "--train 'cuda': not a CUDA train", id="bad-train"),
        pytest.param([], 13000, 5, "no CUDA train given: pass --train cu132", id="no-train"),
        pytest.param(
            ["--train", "cu130", "--cxx-standard", "14"],
            13000,
            2,
            "--cxx-standard 14: nvcc of CUDA 13.0",
            id="bad-standard",
        ),
        pytest.param(
            ["--train", "cu130", "--platform", "macos-arm64"],
            13000,
            2,
            "invalid value for '--platform'",
            id="bad-platform",
        ),
        pytest.param(
            ["--train", "cu130", "--machine", "mips"], 13000, 2, "unknown machine 'mips'", id="bad-machine"
        ),
        pytest.param(
            ["--train", "cu130", "--write", "cache", "x"],
            13000,
            2,
            "invalid value for '--write'",
            id="bad-write-kind",
        ),
        pytest.param(
            ["--train", "cu130"], None, 2, "cannot tell the CUDA release", id="toolkit-without-release"
        ),
    ],
)
def test_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    cuda_h: int | None,
    code: int,
    message: str,
) -> None:
    tk = toolkit_dir(tmp_path / "cuda", cuda_h) if cuda_h else tmp_path
    got, _, err = run(capsys, "cmake", *argv, "--toolkit", str(tk))
    assert got == code
    assert message in err
    assert "Traceback" not in err


def test_local_nvcc(capsys: pytest.CaptureFixture[str]) -> None:
    if not shutil.which("nvcc"):
        pytest.skip("nvcc not on PATH")
    code, out, err = run(
        capsys, "cmake", "--train", "cu130", "--platform", "linux-x86_64", "--format", "json"
    )
    if code == 2 and "but train cu130 needs" in err:
        pytest.skip("the local nvcc is not CUDA 13.0")
    assert code == 0, err
    data = json.loads(out)
    validate(data, "cmake")
    assert data["toolkit"]["source"] == "PATH" and data["toolkit"]["release_from"] == "nvcc --version"
