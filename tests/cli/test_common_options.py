"""The options several commands take are defined once, in cli/common.py: every command spells them, types them
and explains them the same way (only what they are of changes)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from cudaship.cli.main import SUBCOMMANDS, cli

CLI = Path(__file__).resolve().parents[2] / "src" / "cudaship" / "cli"

#: option -> the commands that take it (a command under a group as "group sub")
SHARED = {
    "--format": {"inspect", "audit", "gpus", "arch-list", "doctor", "matrix", "env", "cmake", "repair"},
    "--output": {"inspect", "audit", "gpus", "arch-list", "doctor", "matrix", "env", "cmake", "repair"},
    "--jobs": {"inspect", "audit", "gpus", "repair"},
    "--progress": {"inspect", "audit", "gpus"},
    "--policy": {"audit", "arch-list", "matrix", "env", "cmake"},
    "--train": {"audit", "arch-list", "env", "cmake", "program check"},
    "--machine": {"arch-list", "env", "cmake"},
    "--platform": {"cmake", "toolkit install", "program check"},
    "--driver": {"gpus", "program check"},
    "--gpu": {"gpus", "program check"},
    "--cache-dir": {"audit", "toolkit install"},
}


def _commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    out: dict[str, click.Command] = {}
    for name in SUBCOMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            out.update({f"{name} {sub}": c for sub, c in command.commands.items()})
        else:
            out[name] = command
    return out


def _option(command: click.Command, name: str) -> click.Option | None:
    for param in command.params:
        if isinstance(param, click.Option) and name in param.opts:
            return param
    return None


def test_no_command_module_defines_a_shared_option_itself() -> None:
    names = "|".join(re.escape(n) for n in SHARED)
    own = re.compile(rf"click\.option\(\s*(?:\"[^\"]*\",\s*)*\"(?:{names})[\"/]")
    for path in sorted(CLI.glob("*_cmd.py")):
        assert not own.search(path.read_text(encoding="utf-8")), f"{path.name} defines a shared option itself"


@pytest.mark.parametrize("name", list(SHARED))
def test_every_command_taking_a_shared_option_has_the_same_option(name: str) -> None:
    commands = _commands()
    found = {label for label, command in commands.items() if _option(command, name) is not None}
    assert SHARED[name] <= found, f"{name} missing from {SHARED[name] - found}"
    shapes = set()
    for label in sorted(SHARED[name]):
        option = _option(commands[label], name)
        assert option is not None and option.help, label
        # the same spelling and default behaviour everywhere; the help ends the same way
        shapes.add((tuple(option.opts), tuple(option.secondary_opts), option.is_flag))
        assert option.help.rstrip().endswith((".", ")")), (label, option.help)
    assert len(shapes) == 1, f"{name} is spelt differently: {shapes}"


def test_the_progress_option_defaults_to_the_terminal() -> None:
    for label, command in _commands().items():
        option = _option(command, "--progress")
        if option is not None:
            assert option.default is None and option.help is not None, label
            assert option.help.endswith("(default: when a terminal)."), label
