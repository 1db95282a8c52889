"""The shell steps of the cudaship GitHub Action (action.yml), as one standard-library-only script.

``action.yml`` runs it as a file (``python <action>/src/cudaship/ci/action_steps.py audit``), so it needs
nothing but Python, whatever cudaship version the Action installed. It reads the Action's inputs from
``INPUT_*`` variables and GitHub's files from ``GITHUB_*`` variables, which lets tests run it with temporary
files.

``audit``: expand the wheel patterns, run ``cudaship audit`` once (markdown, JUnit and JSON reports) and
``cudaship gpus --format html`` into the report directory, append the markdown report to
``$GITHUB_STEP_SUMMARY``, and set the outputs ``exit-code``, ``result`` (passed, failed, error) and
``report-dir`` and ``artifact-name`` in ``$GITHUB_OUTPUT``. It exits 0 so the upload step still runs,
unless it cannot run at all. The artifact's name is ``INPUT_ARTIFACT_NAME`` when given, else derived from
the job and the wheels (:func:`artifact_name`): a composite action cannot see the calling job's matrix, and
every job of a matrix uploading ``cudaship-reports`` would collide (actions/upload-artifact@v4 refuses a
second artifact of one name in a run).
``gate``: exit with the audit's code: 1 on failed checks (unless ``INPUT_FAIL_ON_FINDINGS`` is false), 2 when
the audit could not read its input.

``$CUDASHIP`` names the cudaship command (a path, or a command line such as ``python -m cudaship``); default
``cudaship`` on PATH.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shlex
import subprocess
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

FINDINGS = 1
BAD_INPUT = 2


def _log(message: str) -> None:
    print(f"cudaship-action: {message}", file=sys.stderr, flush=True)


#: Characters shown escaped in an annotation: C0 (but the line feed, encoded below), DEL, C1, the Unicode line
#: separators, bidirectional overrides and isolates, the byte-order mark (the escaping layer's set,
#: cudaship.render.escape, restated here: this script imports nothing of cudaship, whose installed version
#: may be older than the Action's).
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")


def _annotation_data(message: str) -> str:
    """The message of ``::error ...::MESSAGE``: control characters shown as Python writes them, the legacy and
    Azure commands (``##[``, ``##vso[``) broken, ``%`` then CR and LF percent-encoded: one line, whatever the
    message holds."""
    shown = _CONTROL.sub(lambda m: ascii(m.group())[1:-1], message.replace("\r\n", "\n"))
    shown = re.sub("#(?=#(?:vso)?\\[)", "#\\\\", shown)
    return shown.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _error(message: str) -> None:
    # A workflow command: GitHub shows it as an annotation on the job; the message (it may name the inputs'
    # patterns and paths) encoded so that it ends nowhere but at the end of the line.
    print(f"::error title=cudaship::{_annotation_data(message)}", flush=True)


def _truthy(value: str | None, default: bool) -> bool:
    if value is None or not value.strip():
        return default
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, not {value!r}")


def expand_wheels(patterns: str, workspace: Path) -> list[Path]:
    """Every wheel the whitespace- or newline-separated glob patterns match, relative to ``workspace``."""
    found: list[Path] = []
    for pattern in patterns.split():
        base = pattern if os.path.isabs(pattern) else str(workspace / pattern)
        for match in sorted(glob.glob(base, recursive=True)):
            path = Path(match)
            if path.is_file() and path not in found:
                found.append(path)
    return found


#: What an artifact name may not hold (actions/upload-artifact@v4): each replaced by ``-`` in a derived name.
_NOT_IN_ARTIFACT_NAME = re.compile(r'[":<>|*?\\/\x00-\x1f]')


def _wheel_digest(wheels: Sequence[Path]) -> str:
    """8 hex digits that differ between wheels of one name built differently (for another CUDA train, say):
    each wheel's name and size and the name, size and CRC-32 of every member, from the zip's central
    directory (read, not the members: cheap for a wheel of gigabytes)."""
    digest = hashlib.sha256()
    for wheel in sorted(wheels, key=lambda w: w.name):
        digest.update(f"{wheel.name}\0{wheel.stat().st_size}\n".encode())
        try:
            with zipfile.ZipFile(wheel) as zf:
                for info in zf.infolist():
                    digest.update(f"{info.filename}\0{info.file_size}\0{info.CRC}\n".encode())
        except (OSError, zipfile.BadZipFile):
            pass  # the audit reports the unreadable wheel; its name and size still count
    return digest.hexdigest()[:8]


def artifact_name(given: str, wheels: Sequence[Path], environ: Mapping[str, str]) -> str:
    """The name of the report artifact: ``given`` (the ``artifact-name`` input) when not empty, else
    ``cudaship-reports-JOB-WHEEL-DIGEST`` (JOB: ``$GITHUB_JOB``, the job's id; WHEEL: the wheel's name
    less ``.whl``, or the first one's and how many more; DIGEST: :func:`_wheel_digest`), unique across the
    jobs of a matrix as long as they audit different wheels."""
    if given.strip():
        return given.strip()
    job = environ.get("GITHUB_JOB", "").strip() or "job"
    stems = sorted(w.name.removesuffix(".whl") for w in wheels)
    shown = stems[0] if len(stems) == 1 else f"{stems[0]}-and-{len(stems) - 1}-more"
    return _NOT_IN_ARTIFACT_NAME.sub("-", f"cudaship-reports-{job}-{shown}-{_wheel_digest(wheels)}")


def _command(environ: Mapping[str, str]) -> list[str]:
    text = environ.get("CUDASHIP", "").strip() or "cudaship"
    return shlex.split(text, posix=os.name != "nt")


def _run(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    _log("$ " + " ".join(shlex.quote(a) for a in argv))
    try:
        return subprocess.run(list(argv), env=dict(environ), check=False).returncode
    except FileNotFoundError:
        _error(f"cannot run {argv[0]!r}: not found (was cudaship installed?)")
        return BAD_INPUT


def _append(path_var: str, text: str, environ: Mapping[str, str]) -> None:
    target = environ.get(path_var)
    if not target:
        _log(f"{path_var} is not set; skipping")
        return
    # runs as a file (the action's step), before cudaship's package is known to import: only here
    from cudaship.errors import UsageError
    from cudaship.safe_write import append_text

    try:
        append_text(target, text if text.endswith("\n") else text + "\n")
    except UsageError as e:
        _log(f"{path_var}: {e}")


def audit(environ: Mapping[str, str]) -> int:
    workspace = Path(environ.get("GITHUB_WORKSPACE") or os.getcwd())
    report_dir = Path(environ.get("INPUT_REPORT_DIR") or "cudaship-reports")
    if not report_dir.is_absolute():
        report_dir = workspace / report_dir
    report_dir.mkdir(parents=True, exist_ok=True)
    patterns = environ.get("INPUT_WHEELS") or "dist/*.whl"
    wheels = expand_wheels(patterns, workspace)

    def outputs(code: int, result: str, artifact: str) -> None:
        # artifact-name stays empty without a wheel: nothing to upload, and no name to collide
        text = f"exit-code={code}\nresult={result}\nreport-dir={report_dir}\nartifact-name={artifact}\n"
        _append("GITHUB_OUTPUT", text, environ)

    if not wheels:
        _error(f"no wheel matches {patterns!r} (in {workspace})")
        _append("GITHUB_STEP_SUMMARY", f"## cudaship audit\n\nNo wheel matches `{patterns}`.\n", environ)
        outputs(BAD_INPUT, "error", "")
        return 0

    cudaship = _command(environ)
    policy = environ.get("INPUT_POLICY", "").strip()
    common = [str(w) for w in wheels] + (["--policy", policy] if policy else [])
    markdown = report_dir / "audit.md"
    # One audit run writes all three reports: a large wheel is read once, each failure annotated once.
    code = _run(
        [
            *cudaship,
            "audit",
            *common,
            "--format",
            "markdown",
            "-o",
            str(markdown),
            "--report",
            f"junit={report_dir / 'audit.junit.xml'}",
            "--report",
            f"json={report_dir / 'audit.json'}",
        ],
        environ,
    )
    if _truthy(environ.get("INPUT_HTML"), True):
        html_code = _run(
            [
                *cudaship,
                "gpus",
                *[str(w) for w in wheels],
                "--format",
                "html",
                "-o",
                str(report_dir / "gpus.html"),
            ],
            environ,
        )
        if html_code not in (0, FINDINGS):
            _log(f"cudaship gpus exited {html_code}; no HTML report")
    if markdown.is_file():
        _append("GITHUB_STEP_SUMMARY", markdown.read_text(encoding="utf-8"), environ)
    else:
        _append(
            "GITHUB_STEP_SUMMARY",
            f"## cudaship audit\n\nThe audit exited {code} and wrote no report.\n",
            environ,
        )
    result = "passed" if code == 0 else "failed" if code == FINDINGS else "error"
    outputs(code, result, artifact_name(environ.get("INPUT_ARTIFACT_NAME", ""), wheels, environ))
    wheels_text = f"{len(wheels)} wheel" + ("" if len(wheels) == 1 else "s")  # stdlib only: no cudaship.words
    _log(f"audit of {wheels_text}: {result} (exit {code}); reports in {report_dir}")
    return 0


def gate(environ: Mapping[str, str]) -> int:
    text = environ.get("AUDIT_EXIT_CODE", "").strip()
    try:
        code = int(text)
    except ValueError:
        _error(f"the audit step left no exit code ({text!r})")
        return BAD_INPUT
    if code == 0:
        _log("every check passed")
        return 0
    if code == FINDINGS:
        if not _truthy(environ.get("INPUT_FAIL_ON_FINDINGS"), True):
            _log("checks failed; fail-on-findings is false, so the job goes on")
            return 0
        _error("cudaship audit: checks failed (see the job summary and the JUnit report)")
        return FINDINGS
    _error(f"cudaship audit could not run (exit {code}); see the step log")
    return code


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if environ is None else environ
    steps = {"audit": audit, "gate": gate}
    if len(args) != 1 or args[0] not in steps:
        print(f"usage: action_steps.py {{{'|'.join(steps)}}}", file=sys.stderr)
        return BAD_INPUT
    try:
        return steps[args[0]](env)
    except (OSError, ValueError) as e:
        _error(f"{args[0]}: {e}")
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
