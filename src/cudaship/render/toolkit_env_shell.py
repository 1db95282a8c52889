"""``cudaship toolkit env --format shell``: ``export`` lines,
the toolkit's bin directories first on PATH."""

from __future__ import annotations

import os
import shlex

from cudaship.toolkit.records import ToolkitEnv


def render(env: ToolkitEnv) -> str:
    lines = [f"export {k}={shlex.quote(v)}" for k, v in env.variables.items()]
    lines.append(f'export PATH={shlex.quote(os.pathsep.join(env.bins))}{os.pathsep}"$PATH"')
    return "\n".join(lines) + "\n"
