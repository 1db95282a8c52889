"""``cudaship toolkit env --format dotenv``: ``NAME=value`` lines; PATH is the bin directories, then this
process's PATH (a dotenv file cannot refer to the PATH of whoever reads it)."""

from __future__ import annotations

import os

from cudaship.errors import ToolkitError
from cudaship.toolkit.records import ToolkitEnv


def render(env: ToolkitEnv) -> str:
    for key, value in env.variables.items():
        if "\n" in value or "\r" in value:
            raise ToolkitError(f"{key} holds a newline; cannot write it as NAME=value")
    current = os.environ.get("PATH", "")
    path = os.pathsep.join([*env.bins, current] if current else env.bins)
    return "".join(f"{k}={v}\n" for k, v in {**env.variables, "PATH": path}.items())
