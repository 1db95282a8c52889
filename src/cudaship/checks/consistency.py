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
from cudaship.checks.cuda_content import cuda_evidence
from cudaship.checks.nvidia import requirement_major
from cudaship.checks.requirements import nvidia_requirements
from cudaship.errors import CudashipError
from cudaship.knowledge.cuda_claims import claim
from cudaship.knowledge.releases import isa_tuple, release_for, release_for_ptx_isa
from cudaship.knowledge.trains import Train, parse_train
from cudaship.records.binary import DeviceCodeKind
from cudaship.records.files import FileReport, RuntimeLinkage
from cudaship.records.findings import CheckResult, Finding, failed, passed, verdict

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


@dataclass
class _Said:
    """What the check shows (one line per source) and what it finds, in the order the report gives them."""

    shown: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def find(self, message: str, *, file: str | None = None, requirement: str | None = None) -> None:
        self.findings.append(Finding(message, file=file, requirement=requirement))


def run(ctx: AuditContext) -> list[CheckResult]:
    # the train the wheel claims (tag or --train): an inferred one comes from these very sources
    train = ctx.tag_train_or_error
    said = _Said()
    libs = {p: _sources(r) for p, r in sorted(ctx.reports.items())}
    libs = {p: s for p, s in libs.items() if s.labelled() or s.unknown_isa}
    _variants(ctx, libs, said)  # removes the variants from ``libs``
    reqs = [
        (r, m)
        for r in nvidia_requirements(ctx.declared, ("nvidia-",))
        if (m := requirement_major(r)) is not None
    ]
    expected_isa = _claimed(ctx, train, said)
    newest: tuple[Train, str] | None = None  #: the newest device code of the wheel's own libraries
    for path, s in libs.items():
        _shown_line(ctx, train, expected_isa, path, s, said)
        for label, made_by in _device(s):
            if newest is None or made_by > newest[0]:
                newest = (made_by, f"{path}: {label}")
        if not isinstance(train, str):
            _against_train(ctx, train, expected_isa, path, s, said)
        elif s.cudart is not None:
            _against_own_cudart(path, s, said)
    for req, major in reqs:
        said.shown.append(f"requirement {req.text}")
        if not isinstance(train, str) and major != train.major:
            said.find(f"requires CUDA {major} ({req.text}), {ctx.train_claim}", requirement=req.text)
    if isinstance(train, str) and reqs:
        _untagged_requirements(libs, {m for _, m in reqs}, said)
    if len(said.shown) == 1:
        reason = f"{said.shown[0]}; nothing else names a CUDA version"
    else:
        reason = "agree: " + "; ".join(said.shown)
    results = [verdict(FAMILY, "consistency: CUDA train", said.findings, reason)]
    # (a train cudaship has no release for is already a finding above: nothing to compare with)
    if (
        not isinstance(train, str)
        and expected_isa is not None
        and newest is not None
        and newest[0] < train.line
    ):
        results.append(_older_code(ctx, train, newest))
    claimed = claim(ctx.scan.dist.metadata.name, ctx.local) if not ctx.is_program else None
    if claimed is not None:
        results.append(_cuda_claim(claimed, cuda_evidence(ctx)))
    return results


CUDA_CLAIM = "consistency: CUDA claim"


def _cuda_claim(claimed: str, evidence: str | None) -> CheckResult:
    """A wheel whose name or version claims CUDA carries CUDA code (checks.cuda_content)."""
    if evidence is not None:
        return passed(FAMILY, CUDA_CLAIM, f"{claimed} claims a CUDA build: {evidence}", rule="cuda_claim")
    message = (
        f"{claimed} claims a CUDA build, but the wheel carries no CUDA code: no device code, no CUDA library "
        "imported, loaded by name or shipped, no CUDA source: a CPU-only build shipped as CUDA"
    )
    return failed(FAMILY, CUDA_CLAIM, message, [Finding(message)], rule="cuda_claim")


def _variants(ctx: AuditContext, libs: dict[str, _Sources], said: _Said) -> None:
    """Variants (one library per CUDA version) agree with their own train, not the wheel's."""
    for path in [p for p in libs if p in ctx.variants and ctx.variants[p].train is not None]:
        own = ctx.variants[path].train
        assert own is not None
        s = libs.pop(path)
        said.shown.append(f"{path} (variant, {own.version}): {', '.join(label for label, _ in s.labelled())}")
        if s.cudart is not None and s.cudart != own.major:
            said.find(f"cudart {s.cudart}: CUDA {s.cudart}, the variant's name says {own.version}", file=path)
        for label, _release_of in _newer_than(s, own):
            said.find(f"{label}: newer than CUDA {own.version}, which the variant's name says", file=path)


def _claimed(ctx: AuditContext, train: Train | str, said: _Said) -> str | None:
    """The claimed train shown first, and the PTX ISA its release writes (None: no train, or no release)."""
    if isinstance(train, str):
        said.shown.insert(0, "no train tag")
        return None
    said.shown.insert(0, f"{ctx.train_named_by} = {train.version}")
    try:
        return release_for(train).ptx_isa
    except CudashipError as e:
        where = f"+{ctx.local}" if ctx.train_override is None else "--train"
        said.find(f"{where}: {e.message}", requirement=ctx.local)
        return None


def _shown_line(
    ctx: AuditContext, train: Train | str, expected_isa: str | None, path: str, s: _Sources, said: _Said
) -> None:
    """The library's sources shown; PTX newer than cudaship's data is shown, and a failure only when it is
    newer than the claimed release."""
    parts = [label for label, _ in s.labelled()]
    for isa in sorted(s.unknown_isa):
        parts.append(f"PTX ISA {isa} (newer than cudaship's release data)")
        if (
            not isinstance(train, str)
            and expected_isa is not None
            and isa_tuple(isa) > isa_tuple(expected_isa)
        ):
            said.find(
                f"PTX ISA {isa} is newer than CUDA {train.version} writes (PTX ISA {expected_isa}): "
                f"{ctx.train_claim}",
                file=path,
            )
    if parts:
        said.shown.append(f"{path}: {', '.join(parts)}")


def _against_train(
    ctx: AuditContext, train: Train, expected_isa: str | None, path: str, s: _Sources, said: _Said
) -> None:
    """A library of a tagged wheel: its cudart of the train's major, no device code newer than the train."""
    if s.cudart is not None and s.cudart != train.major:
        said.find(f"cudart {s.cudart}: CUDA {s.cudart}, {ctx.train_claim}", file=path)
    for isa, release in sorted(s.ptx.items()):
        if expected_isa is not None:
            if isa_tuple(isa) > isa_tuple(expected_isa):
                said.find(
                    f"PTX ISA {isa} (CUDA {release}) is newer than CUDA {train.version} writes "
                    f"(PTX ISA {expected_isa}): {ctx.train_claim}",
                    file=path,
                )
        elif (found := _release(release)) is not None and found > train.line:
            said.find(f"PTX ISA {isa} = CUDA {release}: newer than {ctx.train_claim}", file=path)
    for release in sorted(s.toolkit):
        found = _release(release)
        if found is not None and found > train.line:
            said.find(
                f"cubins built by CUDA {release}, newer than CUDA {train.version}: {ctx.train_claim}",
                file=path,
            )


def _against_own_cudart(path: str, s: _Sources, said: _Said) -> None:
    """A library of an untagged wheel: its device code no newer than the cudart it imports."""
    assert s.cudart is not None
    runtime = Train(s.cudart, 0)
    newer = [label for label, release in _device(s) if release.major > runtime.major]
    if newer:
        said.find(
            f"sources disagree: {', '.join(newer)} newer than the cudart {s.cudart} it imports", file=path
        )


def _untagged_requirements(libs: dict[str, _Sources], req_majors: set[int], said: _Said) -> None:
    """Without a train: the declared requirements agree with each other and with the cudarts imported."""
    if len(req_majors) > 1:
        said.find(f"declared requirements name CUDA {sorted(req_majors)}")
    for path, s in libs.items():
        if s.cudart is not None and s.cudart not in req_majors:
            said.find(
                f"imports cudart {s.cudart}, the declared requirements are for CUDA "
                + "/".join(str(m) for m in sorted(req_majors)),
                file=path,
            )


def _older_code(ctx: AuditContext, train: Train, newest: tuple[Train, str]) -> CheckResult:
    message = (
        f"the newest device code is CUDA {newest[0].version} ({newest[1]}), older than CUDA "
        f"{train.version}: {ctx.train_claim}; it runs on the drivers that train needs, but was not built "
        "with that release"
    )
    return failed(
        FAMILY,
        "consistency: device code older than the train",
        message,
        [Finding(message, file=newest[1].split(": ", 1)[0])],
        rule="older_code",
    )
