"""consistency: the CUDA train named several ways agrees. Sources: the local version tag (``+cu132``), the
cudart major each library imports dynamically, the CUDA release implied by each library's PTX ISA versions
and by the toolkit each cubin records, and the CUDA major of the declared NVIDIA requirements (only of
projects the knowledge base says are CUDA-versioned,
:func:`~cudaship.knowledge.libraries.project_cuda_major`: ``nvidia-cudnn-frontend>=1.5`` names no CUDA 1).
The report shows each source.

What disagrees is what cannot work as claimed:

* a cudart major (or a CUDA-versioned requirement's major) other than the train's: the runtime is of another
  CUDA;
* device code NEWER than the train (PTX ISA above the one the train's release writes, cubins of a later
  toolkit): it needs a newer driver than the train promises.

Device code OLDER than the train is not a conflict: a library links objects from earlier toolkits (NVIDIA's
own math libraries carry PTX ISA 7.0-7.8 and CUDA 11 cubins next to their CUDA 13 ones), and a newer driver
runs and JITs older code. When all of a wheel's device code is older than its tag (tagged cu132, built with
13.0), a separate check, ``consistency: device code older than the train`` (rule ``older_code``, a warning by
default), says so: it runs, but was not built with the release its tag names.

Without a tag (a wheel carrying one library per CUDA version, say), a library's cudart major is its train: its
device code must not be newer; the declared requirements must agree with each other and with the cudart majors
imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cudaship.checks.context import AuditContext
from cudaship.checks.nvidia import requirement_major
from cudaship.checks.requirements import nvidia_requirements
from cudaship.errors import CudashipError
from cudaship.knowledge.releases import isa_tuple, release_for, release_for_ptx_isa
from cudaship.knowledge.trains import Train, parse_train
from cudaship.records.binary import DeviceCodeKind
from cudaship.records.files import FileReport, RuntimeLinkage
from cudaship.records.findings import CheckResult, Finding, failed, verdict
from cudaship.wheel.records import DeclaredRequirement

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


def _release(value: str) -> Train | None:
    try:
        return parse_train(value).line
    except CudashipError:
        return None


def _device(s: _Sources) -> list[tuple[str, Train]]:
    """(label, release) of the library's device code: PTX ISA releases and cubin toolkits."""
    out = []
    for label, value in s.labelled():
        if label.startswith("cudart "):
            continue
        release = _release(value)
        if release is not None:
            out.append((label, release))
    return out


def _newer_than(s: _Sources, train: Train) -> list[tuple[str, Train]]:
    return [(label, release) for label, release in _device(s) if release > train.line]


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
        if s.cudart is not None and s.cudart != own.major:
            findings.append(
                Finding(
                    f"cudart {s.cudart}: CUDA {s.cudart}, the variant's name says {own.version}", file=path
                )
            )
        for label, _release_of in _newer_than(s, own):
            findings.append(
                Finding(f"{label}: newer than CUDA {own.version}, which the variant's name says", file=path)
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
    newest: tuple[Train, str] | None = None  #: the newest device code of the wheel's own libraries
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
        for label, made_by in _device(s):
            if newest is None or made_by > newest[0]:
                newest = (made_by, f"{path}: {label}")
        if not isinstance(train, str):
            if s.cudart is not None and s.cudart != train.major:
                findings.append(Finding(f"cudart {s.cudart}: CUDA {s.cudart}, {ctx.train_claim}", file=path))
            for isa, release in sorted(s.ptx.items()):
                if expected_isa is not None:
                    if isa_tuple(isa) > isa_tuple(expected_isa):
                        findings.append(
                            Finding(
                                f"PTX ISA {isa} (CUDA {release}) is newer than CUDA {train.version} writes "
                                f"(PTX ISA {expected_isa}): {ctx.train_claim}",
                                file=path,
                            )
                        )
                elif (found := _release(release)) is not None and found > train.line:
                    findings.append(
                        Finding(f"PTX ISA {isa} = CUDA {release}: newer than {ctx.train_claim}", file=path)
                    )
            for release in sorted(s.toolkit):
                found = _release(release)
                if found is not None and found > train.line:
                    findings.append(
                        Finding(
                            f"cubins built by CUDA {release}, newer than CUDA {train.version}: "
                            f"{ctx.train_claim}",
                            file=path,
                        )
                    )
        elif s.cudart is not None:
            runtime = Train(s.cudart, 0)
            newer = [label for label, release in _device(s) if release.major > runtime.major]
            if newer:
                findings.append(
                    Finding(
                        f"sources disagree: {', '.join(newer)} newer than the cudart {s.cudart} it imports",
                        file=path,
                    )
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
    results = [verdict(FAMILY, "consistency: CUDA train", findings, reason)]
    # (a train cudaship has no release for is already a finding above: nothing to compare with)
    if (
        not isinstance(train, str)
        and expected_isa is not None
        and newest is not None
        and newest[0] < train.line
    ):
        message = (
            f"the newest device code is CUDA {newest[0].version} ({newest[1]}), older than CUDA "
            f"{train.version}: {ctx.train_claim}; it runs on the drivers that train needs, but was not built "
            "with that release"
        )
        results.append(
            failed(
                FAMILY,
                "consistency: device code older than the train",
                message,
                [Finding(message, file=newest[1].split(": ", 1)[0])],
                rule="older_code",
            )
        )
    return results
