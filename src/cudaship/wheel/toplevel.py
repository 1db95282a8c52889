"""The importable top-level modules of a distribution, from the files it installs (RECORD's site-relative
paths) and its ``top_level.txt``: what ``audit --load`` and ``doctor --env --confirm`` import."""

from __future__ import annotations

_EXTENSION_SUFFIXES = (".so", ".pyd")


def _module_name(top: str) -> str | None:
    """The module a top-level file installs (``pkg`` for ``pkg/...``, ``mod`` for ``mod.py`` or
    ``mod.cpython-312-x86_64-linux-gnu.so``), or None."""
    if top.endswith(".py"):
        return top[:-3]
    if top.endswith(_EXTENSION_SUFFIXES) and "." in top:
        return top.split(".", 1)[0]
    return None


def top_level_modules(installed: list[str], top_level_txt: str | None) -> tuple[str, ...]:
    """Importable top-level modules of the installed files (site-relative paths)."""
    packages: dict[str, bool] = {}  # name -> has __init__.py
    modules: list[str] = []
    sub: dict[str, set[str]] = {}
    for path in installed:
        parts = path.split("/")
        if parts[0].endswith((".dist-info", ".data")) or parts[0] == "__pycache__":
            continue
        if len(parts) == 1:
            name = _module_name(parts[0])
            if name and name.isidentifier() and name not in modules:
                modules.append(name)
            continue
        if not parts[0].isidentifier():
            continue
        packages.setdefault(parts[0], False)
        if len(parts) == 2 and parts[1] == "__init__.py":
            packages[parts[0]] = True
        if len(parts) == 3 and parts[2] == "__init__.py" and parts[1].isidentifier():
            sub.setdefault(parts[0], set()).add(parts[1])
    wanted = None
    if top_level_txt:
        wanted = [ln.strip() for ln in top_level_txt.splitlines() if ln.strip() and "/" not in ln]
    out: list[str] = []
    for name in sorted(packages):
        if wanted is not None and name not in wanted:
            continue
        if packages[name]:
            out.append(name)
        else:  # a namespace directory: its regular packages one level down
            out.extend(f"{name}.{s}" for s in sorted(sub.get(name, ())))
    out.extend(m for m in modules if wanted is None or m in wanted)
    return tuple(dict.fromkeys(out))
