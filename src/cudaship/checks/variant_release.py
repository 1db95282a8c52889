"""A release's variants together: which machine gets which variant, and whether it runs there.

For every machine of a grid (each GPU capability of the GPU table with a GPU on the wheels' machine, times
each published CUDA release a driver may report, from 11.0), the NVIDIA provider's values
(:func:`cudaship.knowledge.variant_provider.supported_values`) and PEP 825's ordering
(:func:`cudaship.analysis.variant_pick.order`) say which variant an installer picks; the picked wheel's
libraries are then judged on that GPU with that driver (:func:`cudaship.knowledge.runs_on.runs_on`, and the
CUDA runtime each links against the driver's CUDA major). ``--gpu``/``--driver`` judge one machine only
("which variant would an installer pick here").

Checks (family ``variant``, rules as the per-wheel checks name them):

* ``variant release: metadata agree``: every wheel's ``variant.json`` and the index's ``*-variants.json``
  describe each label alike, with the same default priorities (rule ``release``);
* ``variant release: picked variants run``: no machine gets a variant that cannot run there (rule
  ``release``);
* ``variant release: coverage``: no machine between two covered ones falls to the null variant or to nothing:
  for one GPU, a driver between two drivers that get a variant; for one driver, a GPU of a major between ones
  that get a variant (rule ``release``);
* ``variant release: null variant``: there is one (else machines no variant fits get nothing), and it carries
  no CUDA code (it is what machines without an NVIDIA GPU get) (rule ``null``, a warning).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cudaship.analysis.variant_pick import default_drivers, pick, release_variants
from cudaship.checks.context import AuditContext
from cudaship.checks.variant_props import FAMILY, device_libraries, known_capabilities
from cudaship.knowledge.arch_names import Arch
from cudaship.knowledge.runs_on import runs_on
from cudaship.knowledge.variant_provider import cuda_text
from cudaship.records.findings import CheckResult, Finding, failed, passed, skipped
from cudaship.wheel.records import VariantDescription, VariantMetadata
from cudaship.words import count

RULE = "release"
NULL_RULE = "null"
NULL = "null"


@dataclass(frozen=True)
class Pick:
    """What one machine gets."""

    capability: str  #: "9.0"
    cuda: str  #: the CUDA version its driver reports, "12.8"
    label: str | None  #: the variant installed; None: nothing (no null variant and no variant fits)
    runs: bool | None  #: None: not judged (the null variant, or a label whose wheel was not given)
    reason: str


@dataclass(frozen=True)
class ReleaseReport:
    """``cudaship variant release``: the picks of every machine judged and the release's checks."""

    wheels: tuple[str, ...]  #: file names
    index: str | None  #: the ``*-variants.json`` read, when one was
    labels: tuple[str, ...]
    picks: tuple[Pick, ...]
    checks: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return not any(c.is_error for c in self.checks)


def _description(ctx: AuditContext) -> VariantDescription:
    variant = ctx.scan.dist.variant
    assert variant is not None
    return variant.description


def _runs(ctx: AuditContext, capability: Arch, cuda: tuple[int, int]) -> tuple[bool, str]:
    for path, report in sorted(ctx.libraries.items()):
        link = report.linkage
        if link is not None and link.cudart_major is not None and link.cudart_major > cuda[0]:
            return (
                False,
                f"{path} links the CUDA {link.cudart_major} runtime; the driver supports CUDA "
                f"{cuda_text(cuda)}",
            )
    libs = device_libraries(ctx)
    for path, report in libs.items():
        v = runs_on(report.device_code, capability, cuda_text(cuda))
        if not v.runs:
            return False, f"{path}: {v.reason}"
    return True, f"runs ({count(len(libs), 'library', 'libraries')} with device code)"


def release(
    wheels: Sequence[AuditContext],
    index: VariantMetadata | None = None,
    *,
    capabilities: Sequence[Arch] | None = None,
    drivers: Sequence[tuple[int, int]] | None = None,
) -> ReleaseReport:
    """Judge the variant wheels ``wheels`` (and the index's ``*-variants.json``, when given) of one release on
    every machine of the grid (or the ``capabilities`` by ``drivers`` given)."""
    checks: list[CheckResult] = []
    by_label: dict[str, AuditContext] = {}
    findings: list[Finding] = []
    for ctx in wheels:
        variant = ctx.scan.dist.variant
        if variant is None:
            findings.append(Finding(f"{ctx.scan.filename} is not a variant wheel", file=ctx.scan.filename))
            continue
        if variant.label in by_label:
            other = by_label[variant.label].scan.filename
            findings.append(Finding(f"{ctx.scan.filename} and {other} are both variant {variant.label!r}"))
        by_label.setdefault(variant.label, ctx)
    listed = {v.label: v for v in index.variants} if index is not None else {}
    merged, priorities = release_variants(
        [c.scan.dist.variant for c in by_label.values() if c.scan.dist.variant is not None], index
    )
    descriptions = {d.label: d for d in merged}
    for label, ctx in by_label.items():
        variant = ctx.scan.dist.variant
        assert variant is not None
        if label in listed and listed[label].properties != variant.description.properties:
            findings.append(
                Finding(
                    f"{ctx.scan.filename}'s variant.json and the index's {index.source if index else ''} "
                    "describe "
                    f"{label!r} differently",
                    file=ctx.scan.filename,
                )
            )
        if index is not None and label not in listed:
            findings.append(Finding(f"the index does not list {ctx.scan.filename}'s variant {label!r}"))
        if variant.metadata.priorities != priorities:
            findings.append(
                Finding(
                    f"{ctx.scan.filename}'s default-priorities differ from the release's",
                    file=ctx.scan.filename,
                )
            )
    checks.append(
        failed(FAMILY, "variant release: metadata agree", findings[0].message, findings, rule=RULE)
        if findings
        else passed(
            FAMILY,
            "variant release: metadata agree",
            f"{count(len(descriptions), 'variant')}: every wheel's variant.json agrees with the release",
            rule=RULE,
        )
    )
    if priorities is None:  # no variant wheel and no index
        return ReleaseReport(
            tuple(c.scan.filename for c in wheels), index.source if index else None, (), (), tuple(checks)
        )
    first = next(iter(by_label.values()), wheels[0] if wheels else None)
    caps = tuple(capabilities) if capabilities is not None else (known_capabilities(first) if first else ())
    cudas = tuple(drivers) if drivers is not None else default_drivers()
    variants = list(descriptions.values())
    picks: list[Pick] = []
    for cap in caps:
        for cuda in cudas:
            best = pick(variants, priorities, cap, cuda)
            if best is None:
                picks.append(
                    Pick(cap.capability, cuda_text(cuda), None, None, "no variant fits and no null variant")
                )
                continue
            picked = by_label.get(best.label)
            if best.is_null:
                picks.append(
                    Pick(cap.capability, cuda_text(cuda), best.label, None, "the null variant (fallback)")
                )
            elif picked is None:
                picks.append(
                    Pick(cap.capability, cuda_text(cuda), best.label, None, "its wheel was not given")
                )
            else:
                ok, why = _runs(picked, cap, cuda)
                picks.append(Pick(cap.capability, cuda_text(cuda), best.label, ok, why))
    checks.append(_picked_run(picks))
    if capabilities is None and drivers is None:
        checks.append(_coverage(picks, caps, cudas))
    else:
        checks.append(
            skipped(
                FAMILY,
                "variant release: coverage",
                "judged on the machines asked only (--gpu, --driver)",
                rule=RULE,
            )
        )
    checks.append(_null(descriptions, by_label))
    return ReleaseReport(
        tuple(c.scan.filename for c in wheels),
        index.source if index else None,
        tuple(descriptions),
        tuple(picks),
        tuple(checks),
    )


def _picked_run(picks: list[Pick]) -> CheckResult:
    name = "variant release: picked variants run"
    bad = [p for p in picks if p.runs is False]
    judged = [p for p in picks if p.runs is not None]
    if not judged:
        return skipped(FAMILY, name, "no machine gets a variant whose wheel was given", rule=RULE)
    if bad:
        findings = [
            Finding(
                f"GPU {p.capability}, driver for CUDA {p.cuda}: gets {p.label!r}, which does not run: "
                f"{p.reason}"
            )
            for p in bad
        ]
        return failed(
            FAMILY,
            name,
            f"{count(len(bad), 'machine')} get a variant that cannot run there; first: {findings[0].message}",
            findings,
            rule=RULE,
        )
    return passed(
        FAMILY, name, f"every machine that gets a variant ({len(judged)} judged) runs it", rule=RULE
    )


def _coverage(picks: list[Pick], caps: Sequence[Arch], cudas: Sequence[tuple[int, int]]) -> CheckResult:
    name = "variant release: coverage"
    covered = {(p.capability, p.cuda) for p in picks if p.label is not None and p.label != NULL}
    if not covered:
        return failed(
            FAMILY, name, "no machine of the grid gets a variant other than the null one", rule=RULE
        )
    gaps: list[Finding] = []
    cuda_texts = [cuda_text(c) for c in cudas]
    for cap in caps:
        got = [i for i, c in enumerate(cuda_texts) if (cap.capability, c) in covered]
        if got:
            for i in range(got[0], got[-1] + 1):
                if (cap.capability, cuda_texts[i]) not in covered:
                    gaps.append(
                        Finding(
                            f"GPU {cap.capability}, driver for CUDA {cuda_texts[i]}: no variant (drivers "
                            "for CUDA "
                            f"{cuda_texts[got[0]]} and {cuda_texts[got[-1]]} get one)",
                            arch=f"sm_{cap.sm}",
                            version=cuda_texts[i],
                        )
                    )
    seen = {(f.arch, f.version) for f in gaps}
    for c in cuda_texts:
        got = [i for i, cap in enumerate(caps) if (cap.capability, c) in covered]
        if got:
            for i in range(got[0], got[-1] + 1):
                cap = caps[i]
                if (cap.capability, c) not in covered and (f"sm_{cap.sm}", c) not in seen:
                    gaps.append(
                        Finding(
                            f"GPU {cap.capability}, driver for CUDA {c}: no variant (GPUs "
                            f"{caps[got[0]].capability} "
                            f"and {caps[got[-1]].capability} get one)",
                            arch=f"sm_{cap.sm}",
                            version=c,
                        )
                    )
    if gaps:
        return failed(
            FAMILY,
            name,
            f"{count(len(gaps), 'machine')} inside the covered range get no variant; first: "
            f"{gaps[0].message}",
            gaps,
            rule=RULE,
        )
    return passed(
        FAMILY, name, f"{count(len(covered), 'machine')} get a variant, with no gap between them", rule=RULE
    )


def _null(descriptions: dict[str, VariantDescription], by_label: dict[str, AuditContext]) -> CheckResult:
    name = "variant release: null variant"
    if NULL not in descriptions:
        return failed(
            FAMILY,
            name,
            "no null variant: machines no variant fits (no NVIDIA GPU, an old driver) get nothing from this "
            "release",
            [Finding("no null variant")],
            rule=NULL_RULE,
        )
    ctx = by_label.get(NULL)
    if ctx is None:
        return passed(
            FAMILY, name, "the release lists a null variant (its wheel was not given)", rule=NULL_RULE
        )
    cuda = sorted(p for p in device_libraries(ctx)) + sorted(
        p for p, r in ctx.libraries.items() if r.linkage is not None and r.linkage.cudart_major is not None
    )
    if cuda:
        shown = ", ".join(sorted(set(cuda)))
        return failed(
            FAMILY,
            name,
            f"the null variant carries CUDA code ({shown}): it is what machines without an NVIDIA GPU get",
            [Finding(f"{p}: CUDA device code or runtime", file=p) for p in sorted(set(cuda))],
            rule=NULL_RULE,
        )
    return passed(
        FAMILY, name, f"{ctx.scan.filename} is the null variant and carries no CUDA code", rule=NULL_RULE
    )
