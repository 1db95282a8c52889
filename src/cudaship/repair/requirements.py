"""The requirement side of a repair plan, shared by the Linux plan (:mod:`.plan`) and the Windows one
(:mod:`.windows`): which NVIDIA wheels the declared requirements already cover, and the requirements to add,
merged (``cuda-toolkit`` extras of one range in one requirement). Pure: records in, records out.
"""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudaship.checks.context import AuditContext
from cudaship.knowledge.providers import toolkit_extras
from cudaship.knowledge.repair import Provision
from cudaship.repair.records import AddedRequirement


def declared_cover(ctx: AuditContext) -> tuple[set[str], dict[str, set[str]]]:
    """Canonical names of declared requirements for the wheel's platform, and the extras of each."""
    names: set[str] = set()
    extras: dict[str, set[str]] = {}
    for declared in ctx.declared:
        names.add(declared.name)
        try:
            req = Requirement(declared.text)
        except InvalidRequirement:
            continue
        extras.setdefault(declared.name, set()).update(e.lower() for e in req.extras)
    return names, extras


def covered(p: Provision, names: set[str], extras: dict[str, set[str]]) -> bool:
    if canonicalize_name(p.project) in names:
        return True
    installed = toolkit_extras(p.major)
    return any(p.project in installed.get(extra, ()) for extra in extras.get("cuda-toolkit", set()))


def merge_requirements(added: dict[str, tuple[Provision, list[str]]]) -> tuple[AddedRequirement, ...]:
    """One requirement per text; cuda-toolkit extras with the same range and marker in one."""
    toolkit: dict[str, tuple[set[str], list[str], list[str]]] = {}
    out: list[AddedRequirement] = []
    for text, (p, libs) in sorted(added.items()):
        if p.extra is not None:
            tail = text.split("]", 1)[1]
            extras, all_libs, whys = toolkit.setdefault(tail, (set(), [], []))
            extras.add(p.extra)
            all_libs.extend(libs)
            whys.append(p.why)
        else:
            out.append(AddedRequirement(text, tuple(sorted(set(libs))), p.why))
    for tail, (extras, libs, whys) in sorted(toolkit.items()):
        text = f"cuda-toolkit[{','.join(sorted(extras))}]{tail}"
        out.append(AddedRequirement(text, tuple(sorted(set(libs))), "; ".join(sorted(set(whys)))))
    return tuple(sorted(out, key=lambda r: r.text))


def one_major(seen: set[int]) -> int | None:
    """The CUDA major of a wheel without a train, when the libraries it ships or needs name exactly one."""
    return next(iter(seen)) if len(seen) == 1 else None
