"""``cudaship matrix`` end to end through cudaship.cli.main.main: output, exit codes, notes, files."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from cudaship.cli.main import main

SCHEMAS = Path(__file__).resolve().parents[2] / "src" / "cudaship" / "render" / "schemas"


def validate(data: object, name: str) -> None:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(data)


PYPROJECT = """\
[project]
name = "demo"

[tool.cudaship.matrix]
trains = ["cu126", "cu130", "cu132"]
python = ["3.10", "3.12"]
default-train = "cu130"
default-python = "3.12"
{extra}

[tool.cudaship.matrix.platforms.linux-x86_64]
runner = "ubuntu-24.04"
gpu-runner = "linux-gpu"

[tool.cudaship.matrix.platforms.windows-x86_64]
runner = "windows-2022"
gpu-runner = "windows-gpu"
secrets = true
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(extra=""))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "rows", "code"),
    [
        pytest.param(["--event", "pull_request"], 1, 0, id="pr-one-row"),
        pytest.param(
            ["--event", "pull_request", "--labels", "a,ciflow/binaries/all"], 12, 0, id="pr-labelled"
        ),
        pytest.param(
            ["--event", "pull_request", "--labels", "ciflow/binaries/all", "--fork"],
            6,
            0,
            id="fork-no-secret-rows",
        ),
        pytest.param(["--event", "push"], 12, 0, id="push"),
        pytest.param(["--event", "schedule"], 12, 0, id="schedule"),
        pytest.param(["--event", "release"], 12, 0, id="release-complete"),
        pytest.param([], 12, 0, id="default-event-push"),
    ],
)
def test_github_matrix(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], rows: int, code: int
) -> None:
    got, out, _ = run(capsys, "matrix", *argv)
    assert got == code
    data = json.loads(out)
    assert list(data) == ["include"]
    assert len(data["include"]) == rows
    assert "\n" not in out.strip()  # one line, as $GITHUB_OUTPUT wants it
    for row in data["include"]:
        assert {
            "train",
            "python",
            "platform",
            "machine",
            "torch_cuda_arch_list",
            "cmake_cuda_architectures",
        } <= set(row)


def test_fork_note_on_stderr(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "matrix", "--event", "pull_request", "--labels", "ciflow/binaries/all", "--fork"
    )
    assert code == 0
    assert "cudaship: note: fork pull request: 6 rows on windows-x86_64 left out" in err


def test_release_gate_fails_naming_what_is_missing(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text(
        PYPROJECT.format(extra='exclude = [{ train = "cu126" }, { train = "cu132", python = "3.10" }]')
    )
    code, out, err = run(capsys, "matrix", "--event", "release", "--format", "json")
    assert code == 1
    report = json.loads(out)
    validate(report, "matrix")
    assert report["schema"] == 1
    assert report["ok"] is False
    assert report["problems"] == ["supported train cu126 has no row", "(Python 3.10, train cu132) has no row"]
    assert "cudaship: release gate: supported train cu126 has no row" in err
    # the same config is fine for a push
    assert run(capsys, "matrix", "--event", "push")[0] == 0


def test_release_gate_unknown_arch_list(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        PYPROJECT.format(extra="") + '\n[tool.cudaship.archs.cu126]\nx86_64 = "8.0 9.0"\n'
        '[tool.cudaship.archs.cu130]\nx86_64 = "8.0 12.0"\n'
    )
    (project / "pyproject.toml").write_text(text)
    code, out, _ = run(capsys, "matrix", "--event", "release", "--format", "text")
    assert code == 1
    assert "FAIL: train cu132 has no arch list for x86_64" in out


def test_text_and_output_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "matrix", "--event", "pull_request", "--format", "text")
    assert code == 0
    assert out.startswith("build matrix for pull_request: 1 row")
    assert "cu130-py3.12-linux-x86_64 on ubuntu-24.04: sm_80" in out
    code, out, _ = run(capsys, "matrix", "--event", "push", "-o", "m.json")
    assert code == 0 and out == ""
    assert len(json.loads((project / "m.json").read_text())["include"]) == 12


def test_github_output_and_derive_e2e(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    gh_out = project / "gh-output.txt"
    monkeypatch.setenv("GITHUB_OUTPUT", str(gh_out))
    (project / "pyproject.toml").write_text(PYPROJECT.format(extra='exclude = [{ train = "cu132" }]'))
    code, _, _ = run(capsys, "matrix", "--event", "push", "--github-output", "-o", "build.json")
    assert code == 0
    lines = gh_out.read_text().splitlines()
    assert lines[0].startswith("matrix={") and lines[1] == "rows=8" and lines[2] == "has-rows=true"
    assert json.loads(lines[0].removeprefix("matrix=")) == json.loads((project / "build.json").read_text())

    code, out, _ = run(
        capsys, "matrix", "--derive", "e2e", "--from", "build.json", "--event", "push", "--format", "json"
    )
    assert code == 0
    validate(json.loads(out), "matrix")
    code, out, err = run(capsys, "matrix", "--derive", "e2e", "--from", "build.json", "--event", "push")
    assert code == 0
    rows = json.loads(out)["include"]
    assert [(r["train"], r["python"], r["platform"], r["runner"]) for r in rows] == [
        ("cu126", "3.10", "linux-x86_64", "linux-gpu"),
        ("cu126", "3.10", "windows-x86_64", "windows-gpu"),
        ("cu130", "3.10", "linux-x86_64", "linux-gpu"),
        ("cu130", "3.10", "windows-x86_64", "windows-gpu"),
    ]
    assert all(r["kind"] == "e2e" for r in rows)
    assert "train cu132 was not built" in err

    code, out, err = run(
        capsys,
        "matrix",
        "--derive",
        "e2e",
        "--from",
        "build.json",
        "--event",
        "pull_request",
        "--fork",
        "--github-output",
    )
    assert code == 0
    assert json.loads(out) == {"include": []}
    assert "need secrets" in err
    assert gh_out.read_text().splitlines()[-1] == "has-rows=false"


@pytest.mark.parametrize(
    ("argv", "content", "code", "message"),
    [
        pytest.param(["--derive", "e2e"], None, 2, "--derive e2e needs --from", id="derive-without-from"),
        pytest.param(["--from", "x.json"], None, 2, "--from needs --derive e2e", id="from-without-derive"),
        pytest.param(
            ["--derive", "e2e", "--from", "missing.json"],
            None,
            2,
            "missing.json: no such file",
            id="from-missing",
        ),
        pytest.param(
            ["--derive", "e2e", "--from", "bad.json"],
            "{not json",
            2,
            "bad.json: build matrix is not JSON",
            id="from-not-json",
        ),
        pytest.param(
            ["--derive", "e2e", "--from", "bad.json"],
            '{"rows": []}',
            2,
            "bad.json: include: is required: a list of build rows",
            id="from-no-include",
        ),
        pytest.param(
            ["--derive", "e2e", "--from", "bad.json"],
            '{"include": [{"train": "cu130"}]}',
            2,
            "bad.json: include[0].python: is required",
            id="from-row-incomplete",
        ),
        pytest.param(["--event", "merge_group"], None, 2, "invalid value for '--event'", id="bad-event"),
        pytest.param(["--github-output"], None, 2, "GITHUB_OUTPUT is not set", id="github-output-unset"),
    ],
)
def test_bad_usage(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    content: str | None,
    code: int,
    message: str,
) -> None:
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    if content is not None:
        (project / "bad.json").write_text(content)
    got, _, err = run(capsys, "matrix", *argv)
    assert got == code
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("pyproject", "code", "message"),
    [
        pytest.param(None, 2, "no configuration found", id="no-config"),
        pytest.param(
            "[tool.cudaship]\nmatrix = 3\n",
            2,
            "matrix: must be a table, not an integer",
            id="matrix-not-table",
        ),
        pytest.param(
            '[tool.cudaship.matrix]\ntrains = ["cu130"]\n',
            2,
            "matrix.python: is required",
            id="python-missing",
        ),
        pytest.param("[tool.cudaship.matrix\n", 2, "invalid TOML", id="broken-toml"),
    ],
)
def test_bad_config(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    pyproject: str | None,
    code: int,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    got, _, err = run(capsys, "matrix", "--policy", "pyproject.toml") if pyproject else run(capsys, "matrix")
    assert got == code
    assert message in err
    assert err.count("\n") == 1
