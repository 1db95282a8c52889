"""One output layer: every command takes -f/--format and -o, picks its renderer from render.table, writes
through one writer; usage errors are one line like every other error."""

from __future__ import annotations

import shutil
from pathlib import Path

import click
import pytest

from cudaship.cli.main import SUBCOMMANDS, cli, main
from cudaship.render.table import COMMANDS, Command, formats

REPO = Path(__file__).resolve().parents[2]
PTE = REPO / "tests" / "program" / "data" / "demo_mlp_cuda.pte"

MATRIX_PYPROJECT = """\
[project]
name = "demo"

[tool.cudaship.matrix]
trains = ["cu130"]
python = ["3.12"]
default-train = "cu130"
default-python = "3.12"

[tool.cudaship.matrix.platforms.linux-x86_64]
runner = "ubuntu-24.04"
"""


def _leaves() -> list[tuple[str, click.Command]]:
    """Every runnable command, by its table key (``inspect``, ``toolkit env``, ``program check``)."""
    ctx = click.Context(cli)
    out: list[tuple[str, click.Command]] = []
    for name in SUBCOMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            out += [(f"{name} {sub}", c) for sub, c in sorted(command.commands.items())]
        else:
            out.append((name, command))
    return out


def _table_key(key: str) -> str:
    # toolkit install/list/verify/remove share one record per format; toolkit env has its own syntaxes
    if key.startswith("toolkit ") and key != "toolkit env":
        return "toolkit"
    # doctor offers its --env formats (markdown only with --env; plain doctor refuses it as a usage error)
    if key == "doctor":
        return "doctor --env"
    return key


@pytest.mark.parametrize(("key", "command"), _leaves(), ids=[k for k, _ in _leaves()])
def test_every_command_takes_format_and_output(key: str, command: click.Command) -> None:
    options = {opt: p for p in command.params if isinstance(p, click.Option) for opt in p.opts}
    assert "-f" in options and "--format" in options, f"{key}: no -f/--format"
    assert options["-f"] is options["--format"]
    assert "-o" in options and "--output" in options, f"{key}: no -o/--output"
    choice = options["--format"].type
    assert isinstance(choice, click.Choice)
    assert tuple(choice.choices) == formats(_table_key(key)), f"{key}: --format choices are not the table's"


def test_every_table_entry_is_a_renderer() -> None:
    """Each command's loader gives a renderer for exactly the formats the CLI offers, in the same order."""
    count = 0
    for name, command in COMMANDS.items():
        assert isinstance(command, Command) and command.name == name
        renderers = {fmt: command.load(fmt) for fmt in command.names}
        assert all(callable(renderer) for renderer in renderers.values()), name
        assert len({id(r) for r in renderers.values()}) == len(renderers), (
            f"{name}: two formats, one renderer"
        )
        count += len(renderers)
    assert count >= 30


def _argv_cases() -> list[object]:
    cases = [
        pytest.param(["arch-list", "--train", "cu130"], ["torch", "cmake", "json", "plain"], id="arch-list"),
        pytest.param(["env", "--train", "cu130"], ["shell", "dotenv", "json"], id="env"),
        pytest.param(["matrix"], ["github", "json", "text"], id="matrix"),
        pytest.param(["toolkit", "list"], ["text", "json"], id="toolkit-list"),
        pytest.param(["inspect", str(PTE)], ["text", "json"], id="inspect"),
        pytest.param(["gpus", str(PTE)], ["text", "json", "markdown", "html"], id="gpus"),
        pytest.param(["audit", str(PTE)], ["text", "json", "junit", "markdown"], id="audit"),
        pytest.param(["program", "inspect", str(PTE)], ["text", "json"], id="program-inspect"),
    ]
    if shutil.which("nvcc"):
        cases.append(
            pytest.param(
                ["cmake", "--train", "cu130", "--platform", "linux-x86_64"],
                ["args", "json", "initial-cache"],
                id="cmake",
            )
        )
    return cases


@pytest.mark.parametrize(("argv", "fmts"), _argv_cases())
def test_output_file_holds_what_stdout_shows(
    argv: list[str],
    fmts: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "pyproject.toml").write_text(MATRIX_PYPROJECT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CUDASHIP_TRAIN", raising=False)
    shown: dict[str, str] = {}
    for fmt in fmts:
        code = main([*argv, "-f", fmt])
        out = capsys.readouterr().out
        assert code == 0, (fmt, out)
        assert out.strip(), f"{fmt}: nothing printed"
        target = tmp_path / f"report.{fmt}"
        assert main([*argv, "--format", fmt, "-o", str(target)]) == 0
        captured = capsys.readouterr()
        assert captured.out == "", f"{fmt}: -o still printed to stdout"
        assert target.read_text() == out, f"{fmt}: -o FILE differs from stdout"
        shown[fmt] = out
    assert len(set(shown.values())) == len(fmts), "two formats rendered the same text"


def test_format_is_case_insensitive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arch-list", "--train", "cu130", "-f", "JSON"]) == 0
    assert capsys.readouterr().out.lstrip().startswith("{")


def test_env_output_file_without_format_is_shell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "build.env"
    assert main(["env", "--train", "cu130", "-o", str(target)]) == 0
    assert capsys.readouterr().out == ""
    assert "export TORCH_CUDA_ARCH_LIST=" in target.read_text()


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        pytest.param(["inspect"], "inspect: missing argument 'PATHS...'", id="missing-argument"),
        pytest.param(
            ["inspect", "-f", "xml", "x"], "inspect: invalid value for '-f' / '--format'", id="bad-choice"
        ),
        pytest.param(["nosuch"], "no such command 'nosuch'", id="unknown-command"),
        pytest.param(["audit", "--bogus", "x.whl"], "audit: no such option '--bogus'", id="unknown-option"),
        pytest.param(["toolkit", "env"], "toolkit env: missing argument 'DIRECTORY'", id="subcommand"),
        pytest.param(["program", "inspect"], "program inspect: missing argument", id="program-subcommand"),
        pytest.param(["gpus", "x", "-o"], "option '-o' requires an argument", id="option-without-value"),
        pytest.param(
            ["arch-list", "--train", "cu130", "--format"], "requires an argument", id="format-no-value"
        ),
    ],
)
def test_usage_errors_are_one_line(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("cudaship: error: "), lines[0]
    assert fragment in lines[0]
    assert "Usage:" not in captured.err and "Traceback" not in captured.err


def test_usage_error_points_at_the_commands_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["program", "inspect"]) == 2
    assert capsys.readouterr().err.rstrip().endswith("(see cudaship program inspect --help)")


@pytest.mark.parametrize("argv", [[], ["toolkit"], ["program"]], ids=["bare", "toolkit", "program"])
def test_a_bare_group_prints_its_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("Usage: cudaship") and "Commands:" in captured.out
    assert captured.err == ""


def test_cli_doc_lists_every_commands_formats() -> None:
    """docs/cli.md's table of formats is the renderer table, command by command, default first."""
    documented: dict[str, tuple[str, ...]] = {}
    for line in (REPO / "docs" / "cli.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`") or cells[0].startswith("`-"):
            continue
        names = [n.strip().strip("`") for n in cells[0].split(",")]
        group = names[0].split()[0] if " " in names[0] else None
        fmts = tuple(f.strip() for f in cells[1].split("(")[0].split(","))
        for name in names:
            key = name if group is None or name.startswith(group) else f"{group} {name}"
            documented[key] = fmts
    for key, _ in _leaves():
        assert documented.get(key) == formats(_table_key(key)), f"docs/cli.md: {key}"


def test_program_check_writes_every_format_to_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.program.builders import gxx_library, make_export_dir, make_pt2

    package = make_pt2(tmp_path / "model.pt2", gxx_library(tmp_path / "lib", "wrapper"))
    export = make_export_dir(tmp_path / "export", package)
    argv = ["program", "check", str(export), "--train", "cu130", "--gpu", "9.0"]
    for fmt in formats("program check"):
        code = main([*argv, "-f", fmt])
        out = capsys.readouterr().out
        target = tmp_path / f"check.{fmt}"
        assert main([*argv, "--format", fmt, "-o", str(target)]) == code
        assert capsys.readouterr().out == ""
        assert target.read_text() == out and out.strip()
