"""``audit --load`` for one wheel: install it (:mod:`~cudaship.oracle.install`), load it in fresh children
(:func:`~cudaship.oracle.observe.observe`), compare with the static verdicts (:mod:`cudaship.checks.load`).

Probes, per wheel: ``import M`` for each top-level module M (``top_level.txt``, else the packages and modules
RECORD installs at the top level; a namespace directory stands for its packages one level down); for each
native library of the wheel, ``dlopen`` after importing every top-level module (the package's own preloading
applies) and ``dlopen`` alone (a library that fails only alone needs that preloading).
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import sys
from collections.abc import Callable
from dataclasses import dataclass

from cudaship.checks import load as load_family
from cudaship.checks.engine import with_severity
from cudaship.checks.policy import Policy
from cudaship.checks.records import CheckResult, LoadCheck, WheelAudit
from cudaship.oracle.install import InstallOptions, LoadEnvironment, cleanup, prepare
from cudaship.oracle.observe import DEFAULT_TIMEOUT, child_environment, observe
from cudaship.oracle.records import Probe, ProbeResult

_OS_NAMES = {"linux": "Linux", "windows": "Windows", "macos": "macOS"}
_EXTENSION_SUFFIXES = (".so", ".pyd")


@dataclass(frozen=True)
class LoadOptions:
    install: InstallOptions = dataclasses.field(default_factory=InstallOptions)
    timeout: float = DEFAULT_TIMEOUT
    jobs: int | None = None


Progress = Callable[[int, int, str], None]


def running_os() -> str:
    if sys.platform.startswith("linux"):
        return "linux"
    if sys.platform == "win32":
        return "windows"
    if sys.platform == "darwin":
        return "macos"
    return sys.platform


def _machine() -> str:
    import platform

    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def platform_skip(audit: WheelAudit) -> str | None:
    """Why this wheel cannot be loaded on this machine (another OS or CPU), or None."""
    facts = audit.facts
    here = running_os()
    tag = facts.tags[0].rsplit("-", 1)[-1] if facts.tags else facts.platform or "?"
    if facts.platform not in (None, "any") and facts.platform != here:
        return f"a {tag} wheel cannot be loaded on {_OS_NAMES.get(here, here)}"
    if facts.machine and facts.machine != _machine():
        return f"a {tag} wheel cannot be loaded on this {_machine()} machine"
    return None


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


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _native(path: str) -> bool:
    base = posixpath.basename(path)
    return base.endswith(".so") or ".so." in base


def _wheel_files(wheel: str) -> tuple[list[str], str | None, str | None, tuple[str, ...]]:
    """Installed paths of the wheel's members, its top_level.txt, its name and Requires-Dist."""
    from cudaship.wheel.archive import WheelArchive
    from cudaship.wheel.metadata import install_path, parse_metadata

    with WheelArchive(wheel) as archive:
        dist_info = archive.dist_info()
        names = [m.name for m in archive.members()]
        top = archive.text_member(f"{dist_info}/top_level.txt") if dist_info else None
        meta_text = archive.text_member(f"{dist_info}/METADATA") if dist_info else None
    installed: list[str] = []
    for name in names:
        where = install_path(name, dist_info) if dist_info else name
        if where:
            installed.append(where)
    project: str | None = None
    requires: tuple[str, ...] = ()
    if meta_text:
        meta = parse_metadata(meta_text.encode("utf-8"))
        project, requires = meta.name, meta.requires_dist
    return installed, top, project, tuple(requires)


def _where(relative: str, sites: tuple[str, ...]) -> str | None:
    for site in sites:
        candidate = os.path.join(site, relative)
        if os.path.isfile(candidate):
            return os.path.realpath(candidate)
    return None


def load_audit(
    audit: WheelAudit, policy: Policy, options: LoadOptions, progress: Progress | None = None
) -> WheelAudit:
    """``audit`` with the loader's results: ``load`` set and the ``load`` family's checks added."""
    skip = platform_skip(audit)
    if skip is not None:
        check, results = load_family.skipped_check(skip)
        return _with(audit, policy, check, results)
    installed, top_txt, project, requires = _wheel_files(audit.path)
    hosts = tuple(getattr(audit, "host_packages", ()) or ())
    if progress is not None:
        progress(0, 0, f"installing {audit.facts.filename}")
    env: LoadEnvironment | None = None
    try:
        prepared = prepare(audit.path, audit.facts.tags, hosts, options.install)
        if isinstance(prepared, str):
            check, results = load_family.skipped_check(prepared)
            return _with(audit, policy, check, results)
        env = prepared
        environment = "; ".join(env.notes)
        if env.failure is not None:
            check, results = load_family.install_failed(env.failure, environment)
            return _with(audit, policy, check, results)
        libs: dict[str, str] = {}
        candidates = sorted({si.file for si in audit.imports} | {p for p in installed if _native(p)})
        for rel in candidates:
            real = _where(rel, env.sites)
            if real is not None and _is_elf(real):
                libs[rel] = real
        tops = top_level_modules(installed, top_txt)
        probes: list[Probe] = [Probe.import_(m) for m in tops]
        for rel in sorted(libs):
            probes.append(Probe.dlopen(libs[rel], after_imports=tops))
            if tops:
                probes.append(Probe.dlopen(libs[rel]))
        children_env = child_environment()
        if env.pythonpath:
            children_env["PYTHONPATH"] = env.pythonpath
        done = [0]

        def tick(result: ProbeResult) -> None:
            done[0] += 1
            if progress is not None:
                progress(done[0], len(probes), result.probe.label)

        obs = observe(
            env.python, probes, env=children_env, timeout=options.timeout, jobs=options.jobs, on_result=tick
        )
        inputs = load_family.LoadInputs(
            installed=libs,
            sites=env.sites,
            top_level=tops,
            on_demand=load_family.on_demand_lookup(project, _requirement_names(requires)),
            environment=environment,
            notes=env.notes[1:],
        )
        check, results = load_family.compare(audit.imports, obs, inputs)
        if env.directory and options.install.keep:
            check = dataclasses.replace(check, notes=(*check.notes, f"environment kept at {env.directory}"))
        return _with(audit, policy, check, results)
    finally:
        cleanup(env, options.install.keep)


def _requirement_names(requires: tuple[str, ...]) -> tuple[str, ...]:
    from packaging.requirements import InvalidRequirement, Requirement

    out = []
    for text in requires:
        try:
            out.append(Requirement(text).name)
        except InvalidRequirement:
            continue
    return tuple(out)


def _with(audit: WheelAudit, policy: Policy, check: LoadCheck, results: list[CheckResult]) -> WheelAudit:
    judged = tuple(with_severity(r, policy) for r in results)
    return dataclasses.replace(audit, checks=(*audit.checks, *judged), load=check)


__all__ = ["LoadOptions", "load_audit", "platform_skip", "top_level_modules"]
