"""``cudaship env``: the row's build environment, written where a later step reads it, and the guard."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from cudaship.ci import archs as ci_archs
from cudaship.cli.main import main
from cudaship.config import ProjectConfig

SCHEMAS = Path(__file__).resolve().parents[2] / "src" / "cudaship" / "render" / "schemas"


def validate(data: object, name: str) -> None:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(data)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_ENV", "CUDASHIP_TRAIN", "TORCH_CUDA_ARCH_LIST", "CMAKE_CUDA_ARCHITECTURES"):
        monkeypatch.delenv(name, raising=False)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def expected(train: str, machine: str) -> ci_archs.ArchSyntaxes:
    table = ci_archs.arch_table(ProjectConfig({}, None))
    return ci_archs.syntaxes(ci_archs.lookup(table, train, machine))


@pytest.mark.parametrize(
    ("train", "machine"),
    [
        pytest.param("cu132", "x86_64", id="cu132-x86_64"),
        pytest.param("13.0", "aarch64", id="13.0-aarch64"),
        pytest.param("cu126", "arm64", id="cu126-arm64-alias"),
    ],
)
def test_shell_output_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], train: str, machine: str
) -> None:
    code, out, _ = run(capsys, "env", "--train", train, "--machine", machine)
    assert code == 0
    script = tmp_path / "env.sh"
    script.write_text(out)
    shown = subprocess.run(
        [
            "bash",
            "-c",
            f'source {script} && printf "%s\\n" "$TORCH_CUDA_ARCH_LIST" "$CMAKE_CUDA_ARCHITECTURES" '
            f'"$CUDASHIP_CUDA_VERSION" "$CUDASHIP_TRAIN"',
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    lists = expected(train, ci_archs.normalize_machine(machine))
    info = ci_archs.train_info(train)
    assert shown == [lists.torch, lists.cmake, info.version, info.tag]


def test_write_github_env_appends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    github_env = tmp_path / "github_env"
    github_env.write_text("EARLIER=1\n")
    monkeypatch.setenv("GITHUB_ENV", str(github_env))
    code, out, err = run(capsys, "env", "--train", "cu130", "--machine", "x86_64", "--write", "github")
    assert code == 0 and out == ""
    assert "wrote 6 variables" in err
    lines = github_env.read_text().splitlines()
    assert lines[0] == "EARLIER=1"
    values = dict(line.split("=", 1) for line in lines[1:])
    lists = expected("cu130", "x86_64")
    assert values["TORCH_CUDA_ARCH_LIST"] == lists.torch
    assert values["CMAKE_CUDA_ARCHITECTURES"] == lists.cmake
    assert values["CUDASHIP_CUDA_VERSION"] == "13.0"


@pytest.mark.parametrize("target", [pytest.param("build.sh", id="sh"), pytest.param("build.env", id="env")])
def test_write_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str) -> None:
    """Any FILE is sourceable: ';' in the lists would end a command in an unquoted NAME=value line."""
    code, out, _ = run(capsys, "env", "--train", "cu132", "--machine", "aarch64", "--write", target)
    assert code == 0 and out == ""
    assert (tmp_path / target).read_text().count("export ") == 6
    shown = subprocess.run(
        ["bash", "-c", f"set -a; source {target}; set +a; env"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"CMAKE_CUDA_ARCHITECTURES={expected('cu132', 'aarch64').cmake}" in shown.splitlines()


def test_formats_and_train_from_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDASHIP_TRAIN", "cu132")
    code, out, _ = run(capsys, "env", "--machine", "x86_64", "--format", "json")
    assert code == 0
    data = json.loads(out)
    validate(data, "env")
    assert data["schema"] == 1 and data["train"] == "cu132" and data["cuda"] == "13.2"
    assert data["variables"]["CUDASHIP_ARCH_LIST"] == expected("cu132", "x86_64").list
    code, out, _ = run(capsys, "env", "--machine", "x86_64", "--write", "dotenv")
    assert code == 0
    assert out.splitlines()[0] == "CUDASHIP_TRAIN=cu132"


def test_config_arch_table_wins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cudaship.archs.cu132]\nx86_64 = "8.9 9.0"\n')
    code, out, _ = run(capsys, "env", "--train", "cu132", "--machine", "x86_64", "--format", "dotenv")
    assert code == 0
    assert "TORCH_CUDA_ARCH_LIST=8.9;9.0+PTX" in out.splitlines()


def test_check_guard(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    lists = expected("cu130", "x86_64")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", lists.torch.replace(";", " "))  # same list, other spelling
    monkeypatch.setenv("CMAKE_CUDA_ARCHITECTURES", lists.cmake)
    assert run(capsys, "env", "--train", "cu130", "--machine", "x86_64", "--check")[0] == 0
    # a reusable workflow replaced the row's list: sm_75 in, sm_89 out
    replaced = lists.torch.replace("8.9;", "").replace("8.0;", "7.5;8.0;")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", replaced)
    code, _, err = run(capsys, "env", "--train", "cu130", "--machine", "x86_64", "--check")
    assert code == 1
    assert f"TORCH_CUDA_ARCH_LIST is '{replaced}', but train cu130 on x86_64 builds '{lists.torch}'" in err
    monkeypatch.delenv("CMAKE_CUDA_ARCHITECTURES")
    code, _, err = run(capsys, "env", "--train", "cu130", "--machine", "x86_64", "--check")
    assert code == 1 and "CMAKE_CUDA_ARCHITECTURES is unset" in err


@pytest.mark.parametrize(
    ("name", "syntax"),
    [("TORCH_CUDA_ARCH_LIST", "torch"), ("CMAKE_CUDA_ARCHITECTURES", "cmake")],
    ids=["torch-only", "cmake-only"],
)
def test_check_takes_one_build_systems_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str, syntax: str
) -> None:
    """A torch-only build sets only TORCH_CUDA_ARCH_LIST (a CMake-only one only CMAKE_CUDA_ARCHITECTURES):
    that variable is enough, and the guard says which one it checked (issue 35: it failed for the other
    being unset)."""
    lists = expected("cu130", "x86_64")
    monkeypatch.setenv(name, getattr(lists, syntax))
    other = next(n for n in ("TORCH_CUDA_ARCH_LIST", "CMAKE_CUDA_ARCHITECTURES") if n != name)
    code, out, err = run(capsys, "env", "--train", "cu130", "--machine", "x86_64", "--check")
    assert (code, out) == (0, ""), err
    lines = err.splitlines()
    assert lines[0].startswith(f"cudaship: env: {name} is the list of train cu130 on x86_64 (checked: ")
    assert lines[1].startswith(f"cudaship: env: {other} is unset (not checked: only ")
    assert len(lines) == 2


def test_check_with_neither_variable_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "env", "--train", "cu130", "--machine", "x86_64", "--check")
    assert code == 1
    assert "TORCH_CUDA_ARCH_LIST is unset (nothing checked)" in err
    assert err.splitlines()[-1].startswith(
        "cudaship: env: set TORCH_CUDA_ARCH_LIST or CMAKE_CUDA_ARCHITECTURES to the list of train cu130"
    )


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        pytest.param([], 5, "no CUDA train given", id="no-train"),
        pytest.param(["--train", "cu999"], 4, "--train 'cu999': unknown CUDA train 99.9", id="unknown-train"),
        pytest.param(["--train", "thirteen"], 4, "--train 'thirteen': not a CUDA train", id="bad-train"),
        pytest.param(
            ["--train", "cu130", "--machine", "riscv64"], 2, "unknown machine 'riscv64'", id="bad-machine"
        ),
        pytest.param(
            ["--train", "cu130", "--write", "github"], 2, "GITHUB_ENV is not set", id="github-env-unset"
        ),
        pytest.param(
            ["--train", "cu130", "--check", "--write", "x.sh"],
            2,
            "--check does not write",
            id="check-and-write",
        ),
        pytest.param(
            ["--train", "cu130", "--write", "no/such/dir/x.sh"], 2, "cannot write", id="unwritable-file"
        ),
    ],
)
def test_errors(capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str) -> None:
    got, _, err = (
        run(capsys, "env", "--machine", "x86_64", *argv)
        if "--machine" not in argv
        else run(capsys, "env", *argv)
    )
    assert got == code
    assert message in err
    assert err.count("\n") == 1
