"""``cudaship toolkit install|list|verify|remove`` (``text``, ``json``: the toolkit's manifest less the file
list) and ``cudaship toolkit env`` (``shell``: ``export`` lines, the toolkit's bin directories first on PATH;
``dotenv``: ``NAME=value`` lines, PATH the bin directories, then this process's PATH, since a dotenv file
cannot refer to the PATH of whoever reads it)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Any

from cudaship.errors import ToolkitError
from cudaship.render.jsonify import dumps, fields
from cudaship.render.style import Renderer, Style
from cudaship.toolkit.records import ToolkitCatalog, ToolkitEnv, ToolkitView
from cudaship.words import count

SCHEMA_VERSION = 1


def _info(view: ToolkitView) -> str:
    info = view.info
    lines = [f"CUDA {info.release} for {info.platform.value} from {info.source.value} at {view.root}"]
    width = max((len(c.component) for c in info.components), default=0)
    lines += [f"  {c.component:<{width}}  {c.name} {c.version}" for c in info.components]
    return "\n".join(lines) + "\n"


def _verify(view: ToolkitView) -> str:
    info, problems = view.info, view.problems or ()
    if not problems:
        where = f"CUDA {info.release} ({info.platform.value}) at {view.root}"
        return f"OK: {count(len(info.files), 'file')} of {where} as recorded\n"
    lines = [
        f"{count(len(problems), 'problem')} in CUDA {info.release} ({info.platform.value}) at {view.root}:"
    ]
    lines += [f"  {p.problem}: {p.path}" for p in problems]
    return "\n".join(lines) + "\n"


def _catalog(catalog: ToolkitCatalog) -> str:
    lines = ["Trains (train -> default release):"]
    lines += [f"  {t:<5} -> {r}" for t, r in catalog.trains.items()]
    lines.append("Components:")
    width = max((len(n) for n in catalog.components), default=0)
    lines += [f"  {n:<{width}}  {d}" for n, d in catalog.components.items()]
    lines.append("Sets:")
    lines += [f"  {k:<{width}}  {', '.join(v)}" for k, v in catalog.sets.items()]
    return "\n".join(lines) + "\n"


def text(view: ToolkitView | ToolkitCatalog, style: Style) -> str:
    if isinstance(view, ToolkitCatalog):
        return _catalog(view)
    if view.problems is not None:
        return _verify(view)
    if view.removed:
        return f"Removed CUDA {view.info.release} ({view.info.platform.value}) at {view.root}\n"
    return ("Installed " if view.installed else "") + _info(view)


def _view_json(view: ToolkitView) -> dict[str, Any]:
    data = view.info.to_json()
    data.pop("files")
    doc: dict[str, Any] = {"schema": SCHEMA_VERSION, "path": str(view.root), **data}
    if view.installed or view.removed:
        doc["action"] = "installed" if view.installed else "removed"
    if view.problems is not None:
        doc.update(
            ok=not view.problems,
            files=len(view.info.files),
            problems=[fields(p) for p in view.problems],
        )
    return doc


def json(view: ToolkitView | ToolkitCatalog, style: Style) -> str:
    if isinstance(view, ToolkitCatalog):
        return dumps({"schema": SCHEMA_VERSION, **fields(view)})
    return dumps(_view_json(view))


def _comments(env: ToolkitEnv) -> list[str]:
    """The notes of what was left out, as ``#`` lines (shell and dotenv both read them as comments)."""
    return [f"# cudaship: {' '.join(note.split())}" for note in env.notes]


def env_shell(env: ToolkitEnv, style: Style) -> str:
    lines = _comments(env)
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.variables.items()]
    if env.bins:  # never an empty PATH entry (which a shell reads as the current directory)
        lines.append(f'export PATH={shlex.quote(os.pathsep.join(env.bins))}{os.pathsep}"$PATH"')
    return "\n".join(lines) + "\n"


def env_dotenv(env: ToolkitEnv, style: Style) -> str:
    for key, value in env.variables.items():
        if "\n" in value or "\r" in value:
            raise ToolkitError(f"{key} holds a newline; cannot write it as NAME=value")
    values = dict(env.variables)
    if env.bins:  # nothing to put on PATH: PATH is not written, so it stays as it is
        values["PATH"] = os.pathsep.join([*env.bins, env.path] if env.path else env.bins)
    return "".join(f"{line}\n" for line in _comments(env)) + "".join(f"{k}={v}\n" for k, v in values.items())


FORMATS: Mapping[str, Renderer[ToolkitView | ToolkitCatalog]] = {"text": text, "json": json}
ENV_FORMATS: Mapping[str, Renderer[ToolkitEnv]] = {"shell": env_shell, "dotenv": env_dotenv}
