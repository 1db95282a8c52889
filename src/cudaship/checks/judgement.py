"""The audit's resolutions as the one judgement (:mod:`cudaship.records.judgement`): how each import is met,
whether the static model is certain of it, and so its severity. ``audit``'s closure family, ``repair``'s
plan and the JSON report (``imports[].met`` / ``certain``) read it from here, so they cannot disagree."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from cudaship.checks.context import AuditContext, canonical_imports
from cudaship.checks.resolve import Resolution, Via, resolve
from cudaship.knowledge.libraries import OS
from cudaship.knowledge.repair import Provision, providers_of, provision
from cudaship.records.binary import FileFormat
from cudaship.records.judgement import Judgement, Met

#: Via -> how the need is met, before the extra is taken into account.
_MET: dict[Via, Met] = {
    Via.SHIPPED: Met.SHIPPED,
    Via.LOADED: Met.SHIPPED,
    Via.REQUIREMENT: Met.REQUIREMENT,
    Via.OPTIONAL: Met.EXTRA,
    Via.RUNTIME: Met.REQUIREMENT,
    Via.PRELOADED: Met.PRELOADED,
    Via.PACKAGE_PRELOAD: Met.PRELOADED,
    Via.BUILD: Met.VARIANT,
    Via.ON_DEMAND: Met.VARIANT,
    Via.HOST: Met.HOST,
    Via.DRIVER: Met.DRIVER,
    Via.SYSTEM: Met.SYSTEM,
    Via.PYTHON: Met.SYSTEM,
    Via.DISTRIBUTION: Met.SYSTEM,
    Via.ALLOWED: Met.SYSTEM,
    Via.COMPUTED: Met.REQUIREMENT,
    Via.PROGRAM_RUNTIME: Met.HOST,
    Via.UNRESOLVED: Met.MISSING,
}

#: Resolutions that hold only through something the static model reads but cannot compute: the package's
#: own Python code loading first, the user's distribution, a sibling loaded first (when it says so), a path
#: the package builds at run time.
_UNCERTAIN = frozenset({Via.PACKAGE_PRELOAD, Via.DISTRIBUTION, Via.COMPUTED})


def judge(res: Resolution) -> Judgement:
    """The judgement of one resolved import."""
    met = Met.SHIPPED if res.own else _MET[res.via]
    if res.extra and (met not in (Met.HOST, Met.MISSING) or res.optional is not None):
        met = Met.EXTRA  # an optional library's need that an extra installs: met by that extra
    certain = not (res.via in _UNCERTAIN or (res.via is Via.LOADED and res.note is not None) or res.uncertain)
    return Judgement(met, certain, optional=res.via is Via.ON_DEMAND or res.optional is not None)


def judged_imports(ctx: AuditContext) -> dict[tuple[str, str], tuple[Resolution, Judgement]]:
    """(installed path, import name lower-cased) -> the audit's resolution and judgement of that import, for
    every import of every shipped library: what ``repair`` reads so it follows the audit's classification."""
    out: dict[tuple[str, str], tuple[Resolution, Judgement]] = {}
    for path, report in sorted(ctx.libraries.items()):
        if report.host is None:
            continue
        for imp in canonical_imports(report):
            res = resolve(ctx, path, report, imp)
            out.setdefault((path, imp.library.lower()), (res, judge(res)))
    return out


@dataclass(frozen=True)
class VendoredCopy:
    """A shipped library an NVIDIA wheel provides: what ``repair`` removes, and what the audit warns about."""

    path: str  #: installed path
    member: str  #: the wheel member
    provision: Provision
    size: int  #: uncompressed bytes saved by depending on the NVIDIA wheel instead
    compressed_size: int


def vendored_copies(ctx: AuditContext) -> tuple[VendoredCopy, ...]:
    """The shipped libraries (a copy's auditwheel/delvewheel hash removed) that an NVIDIA wheel provides for
    the wheel's CUDA train (or the one major the name belongs to), unless the wheel is that provider itself
    or ships it in the provider's own directory, or is (or ships it where) the NVIDIA wheel of another major
    that ships the same name: the rule ``repair`` de-vendors by (issue 32, class 11)."""
    train = ctx.train
    major, minor = (train.major, train.minor) if train is not None else (None, None)
    if ctx.os not in ("linux", "windows"):
        return ()
    os: OS = "linux" if ctx.os == "linux" else "windows"
    want = FileFormat.ELF if os == "linux" else FileFormat.PE
    sizes = {m.name: m for m in ctx.scan.members}
    member_of = {installed: member for member, installed in ctx.installed.items()}
    project = canonicalize_name(ctx.scan.dist.metadata.name or "")
    out: list[VendoredCopy] = []
    for path, report in sorted(ctx.libraries.items()):
        host = report.host
        if host is None or report.format is not want:
            continue
        base = posixpath.basename(path)
        p = (provision(host.soname, os, major, minor) if host.soname else None) or provision(
            base, os, major, minor
        )
        if p is None or canonicalize_name(p.project) == project or posixpath.dirname(path) == p.directory:
            continue
        # an NVIDIA wheel shipping its own library, the provider for another major than the train chosen
        # (nvidia-cufile for CUDA 13 read as 12.x: libcufile.so.0 is nvidia-cufile-cu12's for CUDA 12)
        names = [n for n in (host.soname, base) if n]
        owners = {(canonicalize_name(o), d) for n in names for o, d in providers_of(n, os)}
        if any(o == project or d == posixpath.dirname(path) for o, d in owners):
            continue
        member = member_of.get(path, path)
        facts = sizes.get(member)
        size, packed = (facts.size, facts.compressed_size) if facts else (0, 0)
        out.append(VendoredCopy(path, member, p, size, packed))
    return tuple(out)
