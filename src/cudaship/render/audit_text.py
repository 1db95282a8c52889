"""``cudaship audit --format text``: per wheel, one line per check (PASS, FAIL, WARN, NOTE or SKIP: a failed
check shows its severity; only FAIL fails the audit), the evidence under each failure, and as the very last
line the count: ``55 checks: 50 passed, 1 failed, 4 warnings, 0 skipped``."""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape

from cudaship.checks.records import AuditReport, WheelAudit
from cudaship.records.findings import CheckResult, Finding, Severity, Status
from cudaship.render import escape as escape_for
from cudaship.render.console import text_console
from cudaship.render.style import Style
from cudaship.words import count, shorten

_STYLE = {"PASS": "green", "FAIL": "bold red", "WARN": "bold yellow", "NOTE": "cyan", "SKIP": "yellow"}
_FAILED_LABEL = {Severity.ERROR: "FAIL", Severity.WARNING: "WARN", Severity.NOTE: "NOTE"}
#: Evidence lines shown per failed check before "... and N more".
EVIDENCE_SHOWN = 20
#: Characters of a check's line (or an evidence line) before a long list in it is cut to ``and N more``
#: (without ``-v``); see :func:`cudaship.words.shorten`.
LINE_LIMIT = 240
_WHOLE = "-v or --format json show all"


def render(report: AuditReport, style: Style) -> str:
    """Layout from ``style``: ``color``, ``width``, ``verbose`` (evidence of passing checks too)."""
    verbose = style.verbose
    buffer = io.StringIO()
    console = text_console(buffer, color=style.color, width=style.width)
    source = report.policy_source or "none found"
    policy = f"policy: {source}" + (" (built-in default checks)" if report.policy_default else "")
    if report.ran_code:
        console.print(f"[bold]{escape(report.ran_code)}[/]")
    console.print(f"[bold]cudaship audit[/] · {escape(policy)}")
    if report.resolution is not None and (report.resolution.projects or report.resolution.constraints):
        console.print(escape(report.resolution.line))
    for wheel in report.wheels:
        console.print()
        _wheel(console, wheel, verbose)
        if len(report.wheels) > 1:
            console.print(f"  {escape(wheel.summary.line())}")
    for note in report.notes:
        console.print(f"note: {escape(note)}")
    for error in report.errors:  # an input that could not be audited: its line, with the others' reports
        console.print(f"[bold red]error[/]: {escape(error)}")
    console.print()
    summary = report.summary
    mark = "bold red" if summary.failed else ("bold yellow" if summary.warnings else "bold green")
    console.print(f"[{mark}]{escape(report.summary_line())}[/]")
    return buffer.getvalue()


def _wheel(console: Console, wheel: WheelAudit, verbose: bool) -> None:
    f = wheel.facts
    where = " ".join(x for x in (f.platform, f.machine) if x)
    bits = [
        f"{f.name} {f.version}" if f.name else None,
        where or None,
        f"train {f.train}" if f.train else None,
    ]
    bits.append(f"{count(f.files, 'file')}, {f.native_files} native")
    if not f.cuda_code:
        bits.append("no CUDA code")
    console.print(f"[bold]{escape(f.filename)}[/]  ({escape(' · '.join(b for b in bits if b))})")
    if f.train_source and not (f.local and f.train_source.startswith("local tag")):
        console.print(f"  train: {escape(f.train_source)}")
    for note in wheel.notes:
        text = f"  note: {note}"
        console.print(escape(text if verbose else shorten(text, LINE_LIMIT, where=_WHOLE)))
    if wheel.load is not None:
        load = wheel.load
        console.print(f"  [bold]{escape(load.line)}[/]")
        if load.environment:
            console.print(f"  loaded in: {escape(load.environment)}")
        for note in load.notes:
            console.print(f"  loader note: {escape(note)}")
        if verbose:
            for probe in load.probes:
                outcome = "ok" if probe.ok else f"failed: {probe.message}"
                console.print(f"    {escape(probe.label)}: {escape(outcome)}")
    for check in wheel.checks:
        _check(console, check, verbose)


def status_label(check: CheckResult) -> str:
    """``PASS``, ``SKIP``, or for a failed check its severity: ``FAIL`` (error), ``WARN``, ``NOTE``."""
    if check.status is Status.FAIL:
        return _FAILED_LABEL[check.severity]
    return "PASS" if check.status is Status.PASS else "SKIP"


def _check(console: Console, check: CheckResult, verbose: bool) -> None:
    label = status_label(check)
    line = f"  {label}  {check.name} — {check.reason}"
    if not verbose:
        line = shorten(line, LINE_LIMIT, where=_WHOLE)
    console.print(f"  [{_STYLE[label]}]{label}[/]  {escape(line[len(label) + 4 :])}")
    if check.status is Status.FAIL or verbose:
        evidence = news(check)
        shown = evidence if verbose else evidence[:EVIDENCE_SHOWN]
        for finding in shown:
            text = f"        - {finding_text(finding)}"
            console.print(escape(text if verbose else shorten(text, LINE_LIMIT, where=_WHOLE)))
        if len(evidence) > len(shown):
            console.print(f"        ... and {len(evidence) - len(shown):,} more (-v lists them all)")


def news(check: CheckResult) -> tuple[Finding, ...]:
    """The evidence of ``check`` that says more than its reason: a finding whose message the reason already
    says (whole, or after the ``name: `` it starts with), about a file the check's name or reason names, is
    not repeated under it."""
    said = f"{check.name} {check.reason}"

    def repeats(f: Finding) -> bool:
        message = f.message.strip()
        rest = message.split(": ", 1)[1] if ": " in message else None
        if message not in check.reason and (rest is None or rest not in check.reason):
            return False
        return all(v in said for v in (f.file, f.symbol, f.requirement) if v)

    return tuple(f for f in check.evidence if not repeats(f))


def finding_text(f: Finding) -> str:
    where = [
        f"{k} {v}"
        for k, v in (("file", f.file), ("symbol", f.symbol), ("arch", f.arch), ("requirement", f.requirement))
        if v and v not in f.message
    ]
    return f.message + (f"  [{', '.join(where)}]" if where else "")


_ANNOTATION = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}


def github_annotations(report: AuditReport) -> str:
    """``::error`` / ``::warning`` / ``::notice`` workflow commands, one per failed check by its severity
    (GitHub Actions shows them on the run). Names from the input are encoded by
    :mod:`cudaship.render.escape`: no raw control character, no line break that ends the command."""
    lines = []
    for wheel in report.wheels:
        for check in wheel.checks:
            if check.status is not Status.FAIL:
                continue
            title = escape_for.annotation_property(f"cudaship audit: {check.name}")
            # each line escaped on its own: a line break inside a name is shown, never a line of its own
            lines_of = [check.reason] + [finding_text(f) for f in news(check)[:EVIDENCE_SHOWN]]
            detail = "\n".join(escape_for.text(line) for line in lines_of)
            command = _ANNOTATION[check.severity]
            data = escape_for.annotation_data(f"{escape_for.text(wheel.facts.filename)}: {detail}")
            lines.append(f"::{command} title={title}::{data}")
    return "\n".join(lines) + ("\n" if lines else "")
