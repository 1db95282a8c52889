"""consistency: the CUDA train named several ways agrees. Sources: the local version tag (``+cu132``), the
cudart
major each library imports dynamically, the CUDA release implied by each library's PTX ISA versions and by the
toolkit each cubin records, and the CUDA major of the declared NVIDIA requirements. The report shows each
source.

With a tag, every source is compared with it: majors must be equal, and releases (PTX ISA, cubin toolkit) must
equal the tag's ``major.minor`` (every 13.y train loads the same ``cudart64_13.dll``, so a wheel tagged cu132
but
built with 13.0 would not fail any other way, and PTX newer than the tag needs a newer driver than it
promises).
Without a tag (a wheel carrying one library per CUDA version, say), each library must agree with itself and
the
declared requirements with each other and with the cudart majors imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cudaship.binary.records import DeviceCodeKind
from cudaship.checks.context import AuditContext
from cudaship.checks.nvidia import requirement_major
from cudaship.checks.records import CheckResult, Finding, verdict
from cudaship.checks.requirements import nvidia_requirements
from cudaship.errors import CudashipError
from cudaship.inspection.records import FileReport, RuntimeLinkage
from cudaship.knowledge.releases import isa_tuple, release_for, release_for_ptx_isa
from cudaship.wheel.metadata import DeclaredRequirement

FAMILY = "consistency"


@dataclass
class _Sources:
    """What one library says about its CUDA version."""

    cudart: int | None = None
    ptx: dict[str, str] = field(default_factory=dict)  #: PTX ISA -> CUDA release
    toolkit: set[str] = field(default_factory=set)  #: cubin toolkit releases
    unknown_isa: set[str] = field(default_factory=set)

    def labelled(self) -> list[tuple[str, str]]:
        """(label, major or major.minor) pairs."""
        out: list[tuple[str, str]] = []
        if self.cudart is not None:
            out.append((f"cudart {self.cudart}", str(self.cudart)))
        for isa, release in sorted(self.ptx.items()):
            out.append((f"PTX ISA {isa} = CUDA {release}", release))
        for release in sorted(self.toolkit):
            out.append((f"cubin toolkit {release}", release))
        return out


def _sources(report: FileReport) -> _Sources:
    s = _Sources()
    link = report.linkage
    if link is not None and link.runtime is RuntimeLinkage.DYNAMIC and link.cudart_major is not None:
        s.cudart = link.cudart_major
    for d in report.device_code:
        if d.kind is DeviceCodeKind.PTX and d.version:
            try:
                rel = release_for_ptx_isa(d.version)
            except CudashipError:  # not an X.Y version: nothing to compare
                continue
            if rel is None:
                s.unknown_isa.add(d.version)
            else:
                s.ptx[d.version] = rel.train.version
        elif d.kind is DeviceCodeKind.SASS and d.toolkit_version:
            s.toolkit.add(d.toolkit_version)
    return s


def _major(value: str) -> int:
    return int(value.split(".")[0])


def run(ctx: AuditContext) -> list[CheckResult]:
    # the train the wheel claims (tag or --train): an inferred one comes from these very sources
    train = ctx.tag_train_or_error
    findings: list[Finding] = []
    shown: list[str] = []
    libs = {p: _sources(r) for p, r in sorted(ctx.reports.items())}
    libs = {p: s for p, s in libs.items() if s.labelled() or s.unknown_isa}
    # variants (one per CUDA version) agree with their own train, not the wheel's
    for path in [p for p in libs if p in ctx.variants and ctx.variants[p].train is not None]:
        own = ctx.variants[path].train
        assert own is not None
        s = libs.pop(path)
        shown.append(f"{path} (variant, {own.version}): {', '.join(label for label, _ in s.labelled())}")
        for label, value in s.labelled():
            if _major(value) != own.major:
                findings.append(
                    Finding(
                        f"{label}: CUDA {_major(value)}, the variant's name says {own.version}", file=path
                    )
                )
    reqs: list[tuple[DeclaredRequirement, int]] = []
    for r in nvidia_requirements(ctx.declared, ("nvidia-",)):
        m = requirement_major(r)
        if m is not None:
            reqs.append((r, m))

    expected_isa: str | None = None
    if not isinstance(train, str):
        shown.insert(0, f"{ctx.train_named_by} = {train.version}")
        try:
            expected_isa = release_for(train).ptx_isa
        except CudashipError as e:
            where = f"+{ctx.local}" if ctx.train_override is None else "--train"
            findings.append(Finding(f"{where}: {e.message}", requirement=ctx.local))
    else:
        shown.insert(0, "no train tag")
    for path, s in libs.items():
        labelled = s.labelled()
        parts = [label for label, _ in labelled]
        # PTX newer than cudaship's data: shown; a failure only when it is newer than the claimed release
        for isa in sorted(s.unknown_isa):
            parts.append(f"PTX ISA {isa} (newer than cudaship's release data)")
            if (
                not isinstance(train, str)
                and expected_isa is not None
                and isa_tuple(isa) > isa_tuple(expected_isa)
            ):
                findings.append(
                    Finding(
                        f"PTX ISA {isa} is newer than CUDA {train.version} writes (PTX ISA {expected_isa}): "
                        f"{ctx.train_claim}",
                        file=path,
                    )
                )
        if parts:
            shown.append(f"{path}: {', '.join(parts)}")
        if not isinstance(train, str):
            for label, value in labelled:
                if _major(value) != train.major:
                    findings.append(Finding(f"{label}: CUDA {_major(value)}, {ctx.train_claim}", file=path))
            for isa in sorted(s.ptx):
                if expected_isa is not None and isa != expected_isa and _major(s.ptx[isa]) == train.major:
                    findings.append(
                        Finding(
                            f"PTX ISA {isa} (CUDA {s.ptx[isa]}), {ctx.train_claim} "
                            f"(CUDA {train.version} writes PTX ISA {expected_isa})",
                            file=path,
                        )
                    )
            for release in sorted(s.toolkit):
                if _major(release) == train.major and release != train.version:
                    findings.append(Finding(f"cubins built by CUDA {release}, {ctx.train_claim}", file=path))
        else:
            majors = {_major(v) for _, v in labelled}
            if len(majors) > 1:
                findings.append(
                    Finding(f"sources disagree: {', '.join(label for label, _ in labelled)}", file=path)
                )
    for req, major in reqs:
        shown.append(f"requirement {req.text}")
        if not isinstance(train, str) and major != train.major:
            findings.append(
                Finding(
                    f"requires CUDA {major} ({req.text}), {ctx.train_claim}",
                    requirement=req.text,
                )
            )
    if isinstance(train, str) and reqs:
        req_majors = {m for _, m in reqs}
        if len(req_majors) > 1:
            findings.append(Finding(f"declared requirements name CUDA {sorted(req_majors)}"))
        for path, s in libs.items():
            if s.cudart is not None and s.cudart not in req_majors:
                findings.append(
                    Finding(
                        f"imports cudart {s.cudart}, the declared requirements are for CUDA "
                        + "/".join(str(m) for m in sorted(req_majors)),
                        file=path,
                    )
                )
    if len(shown) == 1:
        reason = f"{shown[0]}; nothing else names a CUDA version"
    else:
        reason = "agree: " + "; ".join(shown)
    return [verdict(FAMILY, "consistency: CUDA train", findings, reason)]
