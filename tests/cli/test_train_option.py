"""One rule for a train a command cannot serve: every command that takes a train (``--train``,
``$CUDASHIP_TRAIN``, ``toolkit install TRAIN``) answers text that is no train and a train its data lacks
the same way: exit 4 and one line ``cudaship: error: LABEL 'TEXT': PROBLEM; DATA knows X.Y, ...``
(docs/cli.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode

#: (command line before the train, the label the message names, the data it names, command line after)
COMMANDS = {
    "audit": (["audit", "--no-progress", "--train"], "--train", "cudaship's release data", ["{wheel}"]),
    "arch-list": (["arch-list", "--machine", "x86_64", "--train"], "--train", "the built-in arch table", []),
    "cmake": (["cmake", "--train"], "--train", "the built-in arch table", []),
    "env": (["env", "--machine", "x86_64", "--train"], "--train", "the built-in arch table", []),
    "program check": (["program", "check", "{dir}", "--train"], "--train", "cudaship's release data", []),
    "toolkit install": (["toolkit", "install"], "TRAIN", "toolkit install", ["--dest", "{dir}/cuda"]),
}

LINE = re.compile(r"^cudaship: error: (\S+) '([^']*)': (.+); (.+) knows (\d+\.\d+(?:, \d+\.\d+)*)$")


def _argv(name: str, text: str, tmp_path: Path) -> list[str]:
    before, _, _, after = COMMANDS[name]
    wheel = tmp_path / "p-1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    fill = {"wheel": str(wheel), "dir": str(tmp_path)}
    return [a.format(**fill) for a in before] + [text] + [a.format(**fill) for a in after]


@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("cu99", "unknown CUDA train 9.9", id="unknown"),
        pytest.param(
            "cu1x", "not a CUDA train (expected cuXY (cu132) or X.Y[.Z] (13.2.2))", id="not-a-train"
        ),
        pytest.param("14.9", "unknown CUDA train 14.9", id="future"),
    ],
)
def test_a_train_the_command_cannot_serve_is_exit_4_and_one_line(
    name: str,
    text: str,
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # no project configuration: the built-in tables answer
    monkeypatch.delenv("CUDASHIP_TRAIN", raising=False)
    code = main(_argv(name, text, tmp_path))
    captured = capsys.readouterr()
    assert code == ExitCode.UNKNOWN_TRAIN, captured.err
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    match = LINE.match(lines[0])
    assert match is not None, lines[0]
    _, label, data, _ = COMMANDS[name]
    assert match.groups()[:4] == (label, text, problem, data)
    assert not (tmp_path / "cuda").exists()


@pytest.mark.parametrize("name", ["arch-list", "env"])
def test_the_environment_variable_follows_the_same_rule(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDASHIP_TRAIN", "cu99")
    assert main([name, "--machine", "x86_64"]) == ExitCode.UNKNOWN_TRAIN
    err = capsys.readouterr().err
    assert err.startswith(
        "cudaship: error: $CUDASHIP_TRAIN 'cu99': unknown CUDA train 9.9; the built-in arch"
    )
    assert err.count("\n") == 1


def test_a_known_train_passes_the_rule_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rule only refuses what the data lacks: 13.0, known to every table, goes on to the work."""
    monkeypatch.chdir(tmp_path)
    assert main(["arch-list", "--machine", "x86_64", "--train", "13.0"]) == ExitCode.OK
    assert main(["env", "--machine", "x86_64", "--train", "cu130"]) == ExitCode.OK
    capsys.readouterr()
    code = main(_argv("program check", "13.0", tmp_path))
    assert code != ExitCode.UNKNOWN_TRAIN
    assert "knows" not in capsys.readouterr().err


@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("text", ["12.7", "cu127", "127"])
def test_an_unpublished_train_is_refused_the_same_way_everywhere(
    name: str, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """12.7 is in the release data (PTX ISA 8.6) but NVIDIA never published it: issue 35 found ``audit``
    accepting it while ``arch-list`` refused it. Every command now refuses it with one message that names the
    published releases."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CUDASHIP_TRAIN", raising=False)
    code = main(_argv(name, text, tmp_path))
    captured = capsys.readouterr()
    assert code == ExitCode.UNKNOWN_TRAIN, captured.err
    _, label, _, _ = COMMANDS[name]
    (line,) = captured.err.splitlines()
    prefix = (
        f"cudaship: error: {label} '{text}': CUDA 12.7 was never published; the published CUDA releases are "
    )
    assert line.startswith(prefix), line
    published = line[len(prefix) :].split(", ")
    assert "12.6" in published and "12.8" in published and "12.7" not in published


@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("text", ["cu13", "13", "cu12"])
def test_a_major_alone_is_no_train(
    name: str, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--train cu13`` was read as CUDA 1.3 (a tag's last digit is the minor); it is refused, saying what to
    write instead."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CUDASHIP_TRAIN", raising=False)
    code = main(_argv(name, text, tmp_path))
    captured = capsys.readouterr()
    assert code == ExitCode.UNKNOWN_TRAIN, captured.err
    (line,) = captured.err.splitlines()
    major = text.removeprefix("cu")
    assert (
        f"CUDA {major} alone is no train, and as a tag it would be 1.{major[1]}: "
        f"write cu{major}0 or {major}.0" in line
    )
    assert "1.3 " not in line.split("would be")[0]


@pytest.mark.parametrize("name", ["arch-list", "env", "cmake"])
def test_digits_alone_read_as_the_tag(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``128`` is 12.8, as ``cu128`` is (issue 35: it was refused while cu128 worked)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CUDASHIP_TRAIN", raising=False)
    outputs = []
    for text in ("cu128", "128", "12.8"):
        argv = _argv(name, text, tmp_path)
        if name == "cmake":  # stop before the toolkit: an unknown machine for the arch table is exit 2
            argv += ["--machine", "x86_64", "--toolkit", str(tmp_path / "none")]
        code = main(argv)
        captured = capsys.readouterr()
        assert code != ExitCode.UNKNOWN_TRAIN, captured.err
        outputs.append((code, captured.out, captured.err.replace(f"'{text}'", "'T'")))
    assert outputs[0] == outputs[1] == outputs[2]


def test_cmake_reads_the_train_cudaship_env_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cudaship env`` exports CUDASHIP_TRAIN; ``cmake`` without --train takes it (issue 35: ignored)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDASHIP_TRAIN", "cu99")
    assert main(["cmake"]) == ExitCode.UNKNOWN_TRAIN
    err = capsys.readouterr().err
    assert err.startswith(
        "cudaship: error: $CUDASHIP_TRAIN 'cu99': unknown CUDA train 9.9; the built-in arch"
    )
    monkeypatch.setenv("CUDASHIP_TRAIN", "cu130")
    with_env = main(["cmake", "--machine", "x86_64", "--toolkit", str(tmp_path / "none")])
    env_err = capsys.readouterr().err
    with_option = main(
        ["cmake", "--train", "cu130", "--machine", "x86_64", "--toolkit", str(tmp_path / "none")]
    )
    assert (with_env, env_err) == (with_option, capsys.readouterr().err)
    assert "UNKNOWN" not in env_err and "no CUDA train" not in env_err
    monkeypatch.delenv("CUDASHIP_TRAIN")
    assert main(["cmake"]) == ExitCode.NO_TRAIN
    assert (
        capsys.readouterr().err
        == "cudaship: error: no CUDA train given: pass --train cu132 (or set CUDASHIP_TRAIN)\n"
    )
