"""How ``repair`` reads the audit's classification of each import (the one judgement,
:mod:`cudaship.checks.judgement`), so the two commands cannot disagree (issue 32, class 10):

* met by the wheel itself (a vendored copy the repair removes), by a requirement, or missing: the library
  is required, so its NVIDIA wheel becomes a requirement (when no declared one covers it);
* met by a requirement under an extra: the extra is how the user gets it; nothing is added, a note names it;
* needed by an optional library (loaded by name at run time for a feature): left alone, with a note;
* met by a host package, a variant for another environment (another CUDA major, another build of torch,
  a ROCm or XPU library), preloaded by a required package, or uncertain (the package's own code decides at
  run time): left alone, with a note.

Pure: the audit's records in, decisions out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cudaship.checks.context import AuditContext
from cudaship.checks.judgement import judged_imports
from cudaship.checks.resolve import Resolution
from cudaship.records.judgement import Judgement, Met

#: What the audit's judgement leaves to the repair: these need an NVIDIA wheel as a requirement.
_REQUIRED = frozenset({Met.SHIPPED, Met.REQUIREMENT, Met.MISSING})

_WHY = {
    Met.HOST: "met by a host package the user installs and imports first",
    Met.VARIANT: "variants for other environments (one per CUDA version or backend), met by that environment",
    Met.PRELOADED: "preloaded by a required package's import",
}


@dataclass
class Follow:
    """The audit's judgements of one wheel, and the notes of what the repair left alone because of them."""

    judged: dict[tuple[str, str], tuple[Resolution, Judgement]]
    project: str
    #: note -> the libraries it concerns, in the order met
    left: dict[str, list[str]] = field(default_factory=dict)

    def required(self, path: str, library: str) -> bool:
        """Whether the repair should make ``library``'s NVIDIA wheel a requirement for ``path``: the audit
        judges the import required (shipped, a requirement or missing); otherwise the reason is noted."""
        found = self.judged.get((path, library.lower()))
        if found is None:
            return True
        res, j = found
        if j.certain and j.met in _REQUIRED and not j.optional:
            return True
        if j.met is Met.EXTRA and res.extra:
            why = f"provided when installed as {self.project}[{res.extra}], as the audit judges it (an extra)"
        elif not j.certain:
            why = "the package's own code decides at run time (uncertain: see `audit --load`)"
        elif j.optional:
            why = "needed by an optional library (loaded by name at run time, for a feature)"
        else:
            why = _WHY.get(j.met, f"met as {j.met.value}")
        self.left.setdefault(f"no requirement added: {why}", []).append(library)
        return False

    def notes(self) -> tuple[str, ...]:
        return tuple(f"{note}: {', '.join(sorted(set(libs)))}" for note, libs in self.left.items())


def follow(ctx: AuditContext) -> Follow:
    """The audit's judgements of the wheel ``ctx`` audits."""
    return Follow(judged_imports(ctx), ctx.scan.dist.metadata.name or "the package")
