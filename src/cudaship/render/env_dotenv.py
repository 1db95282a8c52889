"""``cudaship env --format dotenv``: ``NAME=value`` lines, the format of ``$GITHUB_ENV``, docker
``--env-file`` and python-dotenv."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudaship.render.env_shell import check_value

if TYPE_CHECKING:
    from cudaship.ci.env import BuildEnv


def render(env: BuildEnv) -> str:
    lines = []
    for name, value in env.values:
        check_value(name, value)
        lines.append(f"{name}={value}")
    return "\n".join(lines) + "\n"
