"""requirements: the declared NVIDIA requirements per target platform equal what the policy says, and, with or
without a policy, every CUDA library a shipped library imports dynamically is shipped or provided by a
declared
requirement for the wheel's platform, of the right CUDA major."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudaship.checks import nvidia
from cudaship.checks.context import AuditContext, canonical_imports
from cudaship.checks.policy import expand_template
from cudaship.checks.resolve import Via, resolve
from cudaship.errors import CudashipError
from cudaship.records.findings import CheckResult, Finding, failed, passed, verdict
from cudaship.wheel.records import DeclaredRequirement
from cudaship.words import count, cut_list

FAMILY = "requirements"


def nvidia_requirements(
    reqs: tuple[DeclaredRequirement, ...], prefixes: tuple[str, ...]
) -> tuple[DeclaredRequirement, ...]:
    wanted = tuple(canonicalize_name(p.rstrip("-")) for p in prefixes)
    return tuple(r for r in reqs if any(r.name == w or r.name.startswith(w + "-") for w in wanted))


def _expected_key(text: str) -> str:
    """What the policy expects (its own string, after the template is expanded), keyed as the scan keys a
    declared requirement (:attr:`DeclaredRequirement.key`: canonical name, specifiers sorted)."""
    try:
        req = Requirement(text)
    except InvalidRequirement as e:
        raise CudashipError(f"Requires-Dist {text!r} is invalid: {e}") from None
    specifiers = sorted(str(spec) for spec in req.specifier)
    return canonicalize_name(req.name) + ",".join(specifiers)


def run(ctx: AuditContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    if "requirements" in ctx.policy.configured:
        results.extend(_declared_per_platform(ctx))
    results.append(_imports_provided(ctx))
    return results


def _declared_per_platform(ctx: AuditContext) -> list[CheckResult]:
    policy = ctx.policy.requirements
    results: list[CheckResult] = []
    train = ctx.train_or_error
    for os_name, templates in policy.platforms:
        name = f"requirements: declared for {os_name}"
        machine = ctx.machine if ctx.os == os_name else None
        try:
            declared = nvidia_requirements(ctx.declared_for(os_name, machine or "x86_64"), policy.prefixes)
        except CudashipError as e:
            results.append(failed(FAMILY, name, e.message, [Finding(e.message)]))
            continue
        needs_major = any("{" in t for t in templates)
        if needs_major and isinstance(train, str):
            results.append(
                failed(FAMILY, name, f"cannot expand the expected requirements: {train}", [Finding(train)])
            )
            continue
        expected: dict[str, str] = {}
        for t in templates:
            text = expand_template(t, train.major) if not isinstance(train, str) else t
            try:
                key = _expected_key(text)
            except CudashipError as e:
                results.append(
                    failed(FAMILY, name, f"policy requirement {t!r}: {e.message}", [Finding(e.message)])
                )
                break
            expected[key] = text
        else:
            got = {r.key: r.text for r in declared}
            findings = [
                Finding(
                    f"declares {text} for {os_name}, the policy expects {_list(expected.values())}",
                    requirement=text,
                )
                for key, text in got.items()
                if key not in expected
            ]
            findings += [
                Finding(f"does not declare {text} for {os_name}", requirement=text)
                for key, text in expected.items()
                if key not in got
            ]
            ok = f"declares {_list(got.values())}" if got else "declares no NVIDIA requirement"
            results.append(verdict(FAMILY, name, findings, f"{ok} for {os_name}, as the policy says"))
    return results


def _list(values: Iterable[str]) -> str:
    items = list(values)
    return ", ".join(str(v) for v in items) if items else "none"


def _imports_provided(ctx: AuditContext) -> CheckResult:
    """Every CUDA library imported dynamically is shipped or comes from a declared requirement (directly,
    through an extra, transitively, or loaded first by a required package), of the right CUDA major: the
    provider is found by the library's exact file name, which carries the major."""
    name = "requirements: CUDA imports provided"
    findings: list[Finding] = []
    #: CUDA imports that resolve nowhere: the closure check reports each (one cause, one error)
    in_closure: list[Finding] = []
    evidence: list[Finding] = []
    seen = 0
    for path, report in sorted(ctx.libraries.items()):
        assert report.host is not None
        for imp in canonical_imports(report):
            lib = nvidia.library(imp.library)
            if lib is None:  # not an NVIDIA toolkit library (the driver's libraries are not either)
                continue
            seen += 1
            if ctx.by_name.get(imp.library.lower()):
                continue
            res = resolve(ctx, path, report, imp)
            if res.via is Via.ALLOWED:
                continue
            anywhere = ctx.providers.named(imp.library)
            if res.via is Via.UNRESOLVED and anywhere is not None:
                # declared and installed, but out of the loader's reach: the closure check says so
                evidence.append(
                    Finding(f"{imp.library} ← {anywhere.reached.label()}", file=path, symbol=imp.library)
                )
            elif res.via in (Via.UNRESOLVED, Via.SYSTEM, Via.PYTHON, Via.DRIVER):
                problem = nvidia.provided_by(lib, ctx.declared, ctx.os)
                finding = Finding(
                    problem or f"imports {imp.library}: {res.detail}", file=path, symbol=imp.library
                )
                closure_reports = res.via is Via.UNRESOLVED and ctx.policy.runs("closure")
                (in_closure if closure_reports else findings).append(finding)
            else:
                evidence.append(Finding(res.detail, file=path, symbol=imp.library))
    if findings:
        return verdict(FAMILY, name, findings + in_closure, "")
    if in_closure:
        files = sorted({f.file for f in in_closure if f.file})
        shown = cut_list(files, 4, where="each in the evidence")
        return failed(
            FAMILY,
            name,
            f"{in_closure[0].message}: the same import does not resolve, the closure check reports it "
            f"(closure: {shown})",
            in_closure,
            rule="closure",
        )
    return passed(
        FAMILY,
        name,
        f"{count(seen, 'CUDA library import')}, each shipped or provided by a declared requirement"
        if seen
        else "no shipped library imports a CUDA library dynamically",
        tuple(evidence),
    )
