"""``cudaship env --format shell``: ``export NAME='value'`` lines that POSIX sh, bash and zsh source."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from cudaship.errors import UsageError

if TYPE_CHECKING:
    from cudaship.ci.env import BuildEnv


def check_value(name: str, value: str) -> None:
    """A value an env file cannot hold (a line break or NUL would end or corrupt the line)."""
    if "\n" in value or "\r" in value or "\0" in value:
        raise UsageError(f"{name}: a value with a line break or NUL cannot be written to an env file")


def render(env: BuildEnv) -> str:
    lines = [f"# cudaship build environment for {env.train} on {env.machine}"]
    for name, value in env.values:
        check_value(name, value)
        lines.append(f"export {name}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"
