"""Every command's ``--help`` (issue 35): ends with its exit codes, each a documented one, and holds no
reStructuredText markup (double backticks from docstrings read as ````audit```` on a terminal)."""

from __future__ import annotations

import re

import click
import pytest

from cudaship.cli import exits
from cudaship.cli.main import cli, main
from cudaship.exitcodes import ExitCode


def _paths() -> list[str]:
    ctx = click.Context(cli)
    out = ["cudaship"]
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        out.append(name)
        if isinstance(command, click.Group):
            out += [f"{name} {sub}" for sub in command.list_commands(ctx)]
    return out


def test_every_command_has_its_exit_codes_in_the_table() -> None:
    assert sorted(_paths()) == sorted(exits.EXITS)
    documented = {int(c) for c in ExitCode} | {130}
    for path in exits.EXITS:
        codes = [int(code) for code, _ in exits.codes(path)]
        assert set(codes) <= documented, path
        assert codes == sorted(codes) and len(set(codes)) == len(codes), path


@pytest.mark.parametrize("path", _paths())
def test_help_ends_with_the_exit_codes_and_has_no_markup(
    path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [] if path == "cudaship" else path.split()
    assert main([*argv, "--help"]) == ExitCode.OK
    text = capsys.readouterr().out
    flat = " ".join(text.split())
    assert flat.endswith(exits.epilog(path)), flat[-300:]
    assert "Exit status:" in flat and "130 interrupted (Ctrl-C)" in flat
    assert "`" not in text, [line for line in text.splitlines() if "`" in line]
    assert not re.search(r":(func|class|mod|data|meth):", text)
