"""``cudaship env``: ``shell`` (``export NAME='value'`` lines that POSIX sh, bash and zsh source), ``dotenv``
(``NAME=value`` lines, the format of ``$GITHUB_ENV``, docker ``--env-file`` and python-dotenv) and ``json``
(schema: render/schemas/env.schema.json)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from cudaship.errors import UsageError
from cudaship.render.jsonify import dumps, pick
from cudaship.render.style import Renderer, Style

if TYPE_CHECKING:
    from cudaship.ci.env import BuildEnv

SCHEMA_VERSION = 1


def check_value(name: str, value: str) -> None:
    """A value an env file cannot hold (a line break or NUL would end or corrupt the line)."""
    if "\n" in value or "\r" in value or "\0" in value:
        raise UsageError(f"{name}: a value with a line break or NUL cannot be written to an env file")


def _assignments(env: BuildEnv, quote: Callable[[str], str]) -> list[str]:
    """``NAME=value`` for every variable, the value quoted by ``quote`` (each checked first)."""
    lines = []
    for name, value in env.values:
        check_value(name, value)
        lines.append(f"{name}={quote(value)}")
    return lines


def shell(env: BuildEnv, style: Style) -> str:
    header = f"# cudaship build environment for {env.train} on {env.machine}"
    return "\n".join([header, *(f"export {line}" for line in _assignments(env, shlex.quote))]) + "\n"


def dotenv(env: BuildEnv, style: Style) -> str:
    return "\n".join(_assignments(env, str)) + "\n"


def json(env: BuildEnv, style: Style) -> str:
    return dumps(
        {"schema": SCHEMA_VERSION, **pick(env, "train", "cuda", "machine"), "variables": env.as_dict()}
    )


FORMATS: Mapping[str, Renderer[BuildEnv]] = {"shell": shell, "dotenv": dotenv, "json": json}
