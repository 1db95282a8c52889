"""``cudaship toolkit`` through cli.main: install from a served redist tree, list, verify, env, remove."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from tests.toolkit.builders import RedistTree, build_redist, serve


@pytest.fixture
def tree(tmp_path: Path) -> RedistTree:
    return build_redist(tmp_path / "redist")


@pytest.fixture
def base(tree: RedistTree) -> Iterator[str]:
    with serve(tree.root) as (url, _control):
        yield url


def _install(base: str, dest: Path, tmp_path: Path, *extra: str) -> int:
    return main(
        [
            "toolkit",
            "install",
            "cu130",
            "--platform",
            "linux-x86_64",
            "--dest",
            str(dest),
            "--mirror",
            base,
            "--cache-dir",
            str(tmp_path / "cache"),
            "--retries",
            "0",
            *extra,
        ]
    )


def test_install_json_then_list_verify_env_remove(
    tmp_path: Path, base: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "cuda"
    assert _install(base, dest, tmp_path, "--format", "json", "-q") == ExitCode.OK
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == 1 and report["release"] == "13.0.2" and report["path"] == str(dest)
    assert [c["component"] for c in report["components"]] == ["nvcc", "crt", "nvvm", "cudart", "cccl"]

    assert main(["toolkit", "list", str(dest)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert out.startswith(f"CUDA 13.0.2 for linux-x86_64 from redist at {dest}")
    assert "cuda_nvcc 13.0.88" in out

    assert main(["toolkit", "verify", str(dest)]) == ExitCode.OK
    assert capsys.readouterr().out.startswith("OK: ")
    (dest / "include" / "cuda_runtime.h").write_text("changed")
    assert main(["toolkit", "verify", "--format", "json", str(dest)]) == ExitCode.FINDINGS
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["ok"] is False
    assert verdict["problems"] == [{"path": "include/cuda_runtime.h", "problem": "modified"}]

    assert main(["toolkit", "env", str(dest)]) == ExitCode.OK
    shell = capsys.readouterr().out
    assert f"export CUDA_HOME={dest}\n" in shell
    assert f"export CUDACXX={dest}/bin/nvcc\n" in shell
    assert f'export PATH={dest}/bin:"$PATH"' in shell

    assert main(["toolkit", "remove", str(dest)]) == ExitCode.OK
    assert not dest.exists()


def test_env_write_github(
    tmp_path: Path, base: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "cuda-win"
    assert _install(base, dest, tmp_path, "--platform", "windows-x86_64", "-q") == ExitCode.OK
    github_env, github_path = tmp_path / "github_env", tmp_path / "github_path"
    github_env.write_text("EXISTING=1\n")
    monkeypatch.setenv("GITHUB_ENV", str(github_env))
    monkeypatch.setenv("GITHUB_PATH", str(github_path))
    assert main(["toolkit", "env", str(dest), "--write", "github"]) == ExitCode.OK
    assert github_env.read_text().splitlines() == [
        "EXISTING=1",
        f"CUDA_HOME={dest}",
        f"CUDA_PATH={dest}",
        f"CUDACXX={dest}/bin/nvcc.exe",
    ]
    assert github_path.read_text().splitlines() == [f"{dest}/bin", f"{dest}/bin/x64"]
    assert "wrote 3 variables" in capsys.readouterr().err


def test_env_write_dotenv_to_file(tmp_path: Path, base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    dest = tmp_path / "cuda"
    assert _install(base, dest, tmp_path, "-q", "-c", "cudart,nvcc") == ExitCode.OK
    target = tmp_path / "cuda.env"
    monkeypatch.setenv("PATH", "/opt/tools")  # the CLI reads it (envvars) and hands it to the renderer
    assert main(["toolkit", "env", str(dest), "--write", "dotenv", "-o", str(target)]) == ExitCode.OK
    lines = target.read_text().splitlines()
    assert lines[:2] == [f"CUDA_HOME={dest}", f"CUDA_PATH={dest}"]
    assert lines[2:] == [f"CUDACXX={dest}/bin/nvcc", f"PATH={dest}/bin:/opt/tools"]
    monkeypatch.delenv("PATH")
    assert main(["toolkit", "env", str(dest), "--write", "dotenv", "-o", str(target)]) == ExitCode.OK
    assert target.read_text().splitlines()[3] == f"PATH={dest}/bin"


def test_env_of_a_toolkit_without_bin_exports_no_bin(
    tmp_path: Path, base: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A runtime-only toolkit (-c cudart: include/ and lib/, no bin/): no format puts the missing bin/ on
    PATH (nor an empty PATH entry, which a shell reads as the current directory) or sets CUDACXX; each says
    in a comment line (github: a note on stderr) what it left out and why (issue 35, item 4)."""
    dest = tmp_path / "cuda"
    assert _install(base, dest, tmp_path, "-q", "-c", "cudart") == ExitCode.OK
    capsys.readouterr()
    assert not (dest / "bin").exists()
    left_out = f"# cudaship: PATH: left out {dest}/bin: it does not exist (no component here has programs)"
    no_nvcc = (
        f"# cudaship: CUDACXX: not set: {dest}/bin/nvcc does not exist (this toolkit has no nvcc component)"
    )

    assert main(["toolkit", "env", str(dest)]) == ExitCode.OK
    assert capsys.readouterr().out.splitlines() == [
        left_out,
        no_nvcc,
        f"export CUDA_HOME={dest}",
        f"export CUDA_PATH={dest}",
    ]

    monkeypatch.setenv("PATH", "/opt/tools")
    assert main(["toolkit", "env", str(dest), "-f", "dotenv"]) == ExitCode.OK
    assert capsys.readouterr().out.splitlines() == [
        left_out,
        no_nvcc,
        f"CUDA_HOME={dest}",
        f"CUDA_PATH={dest}",
    ]

    github_env, github_path = tmp_path / "github_env", tmp_path / "github_path"
    monkeypatch.setenv("GITHUB_ENV", str(github_env))
    monkeypatch.setenv("GITHUB_PATH", str(github_path))
    assert main(["toolkit", "env", str(dest), "--write", "github"]) == ExitCode.OK
    err = capsys.readouterr().err
    assert github_env.read_text().splitlines() == [f"CUDA_HOME={dest}", f"CUDA_PATH={dest}"]
    assert not github_path.exists()  # nothing to put on PATH: GITHUB_PATH not touched
    assert f"cudaship: toolkit: note: PATH: left out {dest}/bin: it does not exist" in err
    assert f"wrote 2 variables to {github_env}\n" in err


def test_env_github_without_the_variables_is_a_usage_error(
    tmp_path: Path, base: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "cuda"
    assert _install(base, dest, tmp_path, "-q", "-c", "cudart") == ExitCode.OK
    monkeypatch.delenv("GITHUB_ENV", raising=False)
    assert main(["toolkit", "env", str(dest), "--write", "github"]) == ExitCode.BAD_INPUT
    assert "GITHUB_ENV is not set" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        pytest.param(
            ["toolkit", "install", "14.9", "--dest", "X"],
            ExitCode.UNKNOWN_TRAIN,
            "TRAIN '14.9': unknown CUDA train 14.9; toolkit install knows 11.4, 11.5,",
            id="unknown-train",
        ),
        pytest.param(
            ["toolkit", "install", "13.2.9", "--dest", "X"],
            ExitCode.UNKNOWN_TRAIN,
            "TRAIN '13.2.9': unknown CUDA release 13.2.9; toolkit install knows 13.2.0, 13.2.1, 13.2.2",
            id="unknown-release",
        ),
        pytest.param(
            ["toolkit", "install", "banana", "--dest", "X"],
            ExitCode.UNKNOWN_TRAIN,
            "TRAIN 'banana': not a CUDA train",
            id="not-a-train",
        ),
        pytest.param(
            ["toolkit", "install", "13.0", "--dest", "X", "-c", "nvcc,warp-drive"],
            ExitCode.BAD_INPUT,
            "unknown component 'warp-drive'; components: nvcc, crt",
            id="unknown-component",
        ),
        pytest.param(
            ["toolkit", "install", "13.0", "--dest", "X", "--platform", "macos-arm64"],
            ExitCode.BAD_INPUT,
            "unknown platform 'macos-arm64'",
            id="unknown-platform",
        ),
        pytest.param(
            ["toolkit", "install", "13.0", "--dest", "X", "--max-size", "lots"],
            ExitCode.BAD_INPUT,
            "--max-size: not a size",
            id="bad-size",
        ),
        pytest.param(
            ["toolkit", "install", "13.0", "--dest", "X", "--source", "pypi", "--mirror", "http://x"],
            ExitCode.BAD_INPUT,
            "--mirror applies to --source redist",
            id="mirror-with-pypi",
        ),
    ],
)
def test_bad_usage_is_one_line(
    argv: list[str],
    code: int,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == code
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "X").exists()


def test_failed_install_is_one_line_and_names_the_archive(
    tmp_path: Path, tree: RedistTree, base: str, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tree.manifest()
    entry = manifest["cuda_nvcc"]
    assert isinstance(entry, dict)
    entry["linux-x86_64"]["sha256"] = "0" * 64
    tree.write_manifest(manifest)
    assert _install(base, tmp_path / "cuda", tmp_path, "-q") == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("cudaship: error: cuda_nvcc-linux-x86_64-13.0.88-archive.tar.xz: checksum mismatch")
    assert err.count("\n") == 1


def test_list_known_trains_and_components(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["toolkit", "list", "--format", "json"]) == ExitCode.OK
    data = json.loads(capsys.readouterr().out)
    assert data["trains"]["13.0"] == "13.0.2"
    assert data["trains"]["13.2"] == "13.2.2"
    assert data["trains"]["13.4"] == "13.4.1"
    assert data["sets"]["default"] == ["nvcc", "crt", "nvvm", "cudart", "cccl"]
    assert main(["toolkit", "list"]) == ExitCode.OK
    assert "13.2  -> 13.2.2" in capsys.readouterr().out


def test_verify_and_env_of_a_plain_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["toolkit", "verify", str(tmp_path)]) == ExitCode.BAD_INPUT
    assert "not a cudaship toolkit (no cudaship-toolkit.json)" in capsys.readouterr().err
    (tmp_path / "cudaship-toolkit.json").write_text("{not json")
    assert main(["toolkit", "env", str(tmp_path)]) == ExitCode.BAD_INPUT
    assert "cudaship-toolkit.json is invalid" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("train", "release"),
    [pytest.param("12.4", "12.4.1", id="12.4"), pytest.param("cu118", "11.8.0", id="11.8")],
)
@pytest.mark.parametrize("served", [False, True], ids=["directory", "http"])
def test_older_trains_install_from_a_redist_mirror(
    train: str, release: str, served: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trains before 12.6 install from redist like the newer ones: a local mirror (a directory, or it served
    on 127.0.0.1; no network) holding redistrib_<release>.json and archives whose sha256 it lists. Before
    13.0 crt and nvvm are part of cuda_nvcc, so the default set fetches three archives."""
    tree = build_redist(
        tmp_path / "redist",
        release,
        platforms=("linux-x86_64",),
        components=("cuda_nvcc", "cuda_cudart", "cuda_cccl"),
    )
    dest = tmp_path / "cuda"

    def run(mirror: str) -> int:
        return main(
            [
                "toolkit",
                "install",
                train,
                "--platform",
                "linux-x86_64",
                "--dest",
                str(dest),
                "--mirror",
                mirror,
                "--cache-dir",
                str(tmp_path / "cache"),
                "--retries",
                "0",
                "--format",
                "json",
            ]
        )

    if served:
        with serve(tree.root) as (url, _control):
            code = run(url)
    else:
        code = run(str(tree.root))
    captured = capsys.readouterr()
    assert code == ExitCode.OK, captured.err
    report = json.loads(captured.out)
    assert report["release"] == release
    installed = {c["component"]: c["name"] for c in report["components"]}
    assert installed == {"nvcc": "cuda_nvcc", "cudart": "cuda_cudart", "cccl": "cuda_cccl"}
    assert (dest / "bin" / "nvcc").is_file() and (dest / "include" / "cuda_runtime.h").is_file()
    assert f"crt is part of nvcc in CUDA {release}" in captured.err
    assert main(["toolkit", "verify", str(dest)]) == ExitCode.OK


@pytest.mark.parametrize(
    ("platform", "shown", "hidden"),
    [
        pytest.param("linux-x86_64", "crt and nvvm are separate components", "bin\\x64", id="linux"),
        pytest.param("windows-x86_64", "Its DLLs are in bin\\x64", "\nnever", id="windows"),
    ],
)
def test_the_plan_speaks_of_the_target_platform(
    platform: str,
    shown: str,
    hidden: str,
    tmp_path: Path,
    tree: RedistTree,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`toolkit install 13.0 --components cudart` says what holds for the platform it installs for: a Linux
    plan never mentions Windows DLLs."""
    code = main(
        [
            "toolkit",
            "install",
            "13.0",
            "--components",
            "cudart",
            "--platform",
            platform,
            "--dest",
            str(tmp_path / "cuda"),
            "--mirror",
            str(tree.root),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
    )
    err = capsys.readouterr().err
    assert code == ExitCode.OK, err
    plan = next(line for line in err.splitlines() if line.startswith("cudaship: toolkit: CUDA 13.0.2"))
    assert f"for {platform}: cudart." in plan and shown in plan
    assert hidden not in plan
    if platform.startswith("linux"):
        assert "Windows" not in plan and "DLL" not in plan
