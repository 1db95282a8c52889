"""``cudaship toolkit install|list|verify`` as text."""

from __future__ import annotations

from cudaship.toolkit.records import ToolkitCatalog, ToolkitView
from cudaship.words import count


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


def render(view: ToolkitView | ToolkitCatalog) -> str:
    if isinstance(view, ToolkitCatalog):
        return render_catalog(view)
    if view.problems is not None:
        return _verify(view)
    if view.removed:
        return f"Removed CUDA {view.info.release} ({view.info.platform.value}) at {view.root}\n"
    return ("Installed " if view.installed else "") + _info(view)


def render_catalog(catalog: ToolkitCatalog) -> str:
    lines = ["Trains (train -> default release):"]
    lines += [f"  {t:<5} -> {r}" for t, r in catalog.trains.items()]
    lines.append("Components:")
    width = max((len(n) for n in catalog.components), default=0)
    lines += [f"  {n:<{width}}  {d}" for n, d in catalog.components.items()]
    lines.append("Sets:")
    lines += [f"  {k:<{width}}  {', '.join(v)}" for k, v in catalog.sets.items()]
    return "\n".join(lines) + "\n"
