"""``program run``: run an exported program in a fresh subprocess and compare it with the reference.

The child (:mod:`cudaship.program.runner_child`, run as a script) loads the package with AOTInductor's loader,
runs it ``runs`` times and eager (the saved ``torch.export`` program) as many times in the same process, and
compares with the reference outputs. The parent:

- copies the export directory into a fresh directory, whose name has non-ASCII characters when asked;
- gives the child a PATH with no C/C++/CUDA compiler on it (and no ``CC``/``CXX``), to prove the target needs
  none; the child reports any compiler it could still find;
- reports a child killed by a signal (a loader crash) as a clean failure naming the signal, with the driver,
  GPU capability, runtime versions and memory-pool support the child wrote before loading.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cudaship import envvars
from cudaship.errors import ProgramError
from cudaship.hashing import sha256_file
from cudaship.inspection.program_records import Provenance
from cudaship.inspection.provenance import read_provenance
from cudaship.loaders import read_json
from cudaship.processes import run_text
from cudaship.program import runner_child
from cudaship.program.records import Environment, RunReport

NON_ASCII_DIR = "cudaship-прогон-実行-ü"
#: Seconds a child may take (loading a large program compiles nothing, but first CUDA use can be slow).
DEFAULT_TIMEOUT = 600
DEFAULT_TOLERANCE = 1e-3


def compiler_free_path(path: str | None = None) -> str:
    """``path`` (default $PATH) without the directories that hold a compiler from :data:`COMPILERS`."""
    kept = []
    for entry in (path if path is not None else envvars.get("PATH") or "").split(os.pathsep):
        if not entry:
            continue
        if any(shutil.which(c, path=entry) for c in runner_child.COMPILERS):
            continue
        kept.append(entry)
    return os.pathsep.join(kept)


def child_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "CXX", "CUDAHOSTCXX", "NVCC_PREPEND_FLAGS")}
    env["PATH"] = compiler_free_path(env.get("PATH"))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def _environment(data: dict[str, Any] | None) -> Environment | None:
    if not data:
        return None
    return Environment(
        python=data.get("python"),
        torch=data.get("torch"),
        torch_cuda=data.get("torch_cuda"),
        gpu=data.get("gpu"),
        capability=data.get("capability"),
        driver=data.get("driver"),
        driver_cuda=data.get("driver_cuda"),
        memory_pools=data.get("memory_pools"),
        cudart=tuple(data.get("cudart") or ()),
        compiler_on_path=data.get("compiler_on_path"),
        error=data.get("error"),
    )


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _stage(existing: Path, stage_dir: Path) -> Path:
    """Copy the files a run needs into ``stage_dir`` (verifying nothing; check does that)."""
    shutil.copytree(existing, stage_dir, symlinks=False)
    return stage_dir


def run_program(
    directory: Path,
    *,
    runs: int = 20,
    tolerance: float = DEFAULT_TOLERANCE,
    non_ascii: bool = False,
    python: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    keep: bool = False,
    extra_args: Sequence[str] = (),
) -> RunReport:
    """Run the program of an export directory; never raises for a failing run, only for bad input."""
    if runs < 1:
        raise ProgramError(f"--runs must be at least 1, not {runs}")
    prov = read_provenance(directory)
    package = directory / prov.package
    if not package.is_file():
        raise ProgramError(
            f"the package {prov.package} named by provenance.json is missing", path=str(directory)
        )
    reference = directory / (prov.reference or "reference.pt")
    if not reference.is_file():
        raise ProgramError(
            f"no reference data ({reference.name}): nothing to compare with", path=str(directory)
        )
    if sha256_file(package) != prov.package_sha256:
        raise ProgramError(
            f"{prov.package} does not match the sha256 in provenance.json (changed or corrupt)",
            path=str(directory),
        )
    base = Path(tempfile.mkdtemp(prefix="cudaship-run-"))
    try:
        stage = _stage(directory, base / (NON_ASCII_DIR if non_ascii else "program"))
        return _run_staged(stage, directory, prov, runs, tolerance, python, timeout, extra_args)
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


def _run_staged(
    stage: Path,
    directory: Path,
    prov: Provenance,
    runs: int,
    tolerance: float,
    python: str | None,
    timeout: float,
    extra_args: Sequence[str],
) -> RunReport:
    out = stage / "run-result.json"
    command = [
        python or sys.executable,
        "-X",
        "faulthandler",
        str(Path(runner_child.__file__).resolve()),
        "--json-out",
        str(out),
        "--device",
        prov.device,
        "--package",
        str(stage / prov.package),
        "--reference",
        str(stage / (prov.reference or "reference.pt")),
        "--runs",
        str(runs),
        *extra_args,
    ]
    if prov.exported_program and (stage / prov.exported_program).is_file():
        command += ["--eager", str(stage / prov.exported_program)]
    report = RunReport(
        directory=str(directory),
        provenance=prov,
        ok=False,
        run_directory=str(stage),
        runs=runs,
        tolerance=tolerance,
        loader="torch._inductor.aoti_load_package",
    )
    try:
        done = run_text(command, timeout=timeout, cwd=stage, env=child_environment())
    except subprocess.TimeoutExpired as e:
        stderr = e.stderr.decode("utf-8", "replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        data = _read_result(out)
        return replace(
            report,
            failure=f"the program did not finish within {timeout:g} s (stage: {data.get('stage', '?')})",
            environment=_environment(data.get("environment")),
            stderr_tail=_tail(stderr) or None,
        )
    except OSError as e:
        raise ProgramError(f"cannot start {command[0]}: {e.strerror or e}") from None
    data = _read_result(out)
    env = _environment(data.get("environment"))
    report = replace(report, environment=env, exit_code=done.returncode, load_s=data.get("load_s"))
    stage_name = data.get("stage", "start")
    if done.returncode < 0:
        name = _signal_name(done.returncode)
        return replace(
            report,
            signal=name,
            failure=f"the run process was killed by {name} while at stage '{stage_name}'"
            + (" (loading the package)" if stage_name == "load" else ""),
            stderr_tail=_tail(done.stderr) or None,
        )
    if done.returncode != 0 or data.get("error"):
        return replace(
            report,
            failure=str(data.get("error") or f"the run process exited with status {done.returncode}"),
            stderr_tail=_tail(done.stderr) or None,
        )
    diff = data.get("max_abs_diff")
    notes = []
    if data.get("eager_error"):
        notes.append(f"eager could not run here: {data['eager_error']}")
    if data.get("eager_max_abs_diff") is not None:
        notes.append(f"max abs diff against eager in the same run: {data['eager_max_abs_diff']:.3g}")
    if env is not None and env.compiler_on_path:
        notes.append(f"a compiler was still reachable: {env.compiler_on_path}")
    ok = diff is not None and diff <= tolerance
    return replace(
        report,
        ok=ok,
        max_abs_diff=diff,
        latency_ms=data.get("latency_ms"),
        eager_latency_ms=data.get("eager_latency_ms"),
        failure=None if ok else f"max abs diff {diff:.3g} exceeds the tolerance {tolerance:g}",
        notes=tuple(notes),
    )


def _read_result(path: Path) -> dict[str, Any]:

    try:
        data = read_json(path, error=ProgramError)
    except ProgramError:
        return {}
    return data if isinstance(data, dict) else {}


def diagnose(device: str = "cuda", python: str | None = None, timeout: float = 120) -> Environment | None:
    """The environment as a fresh child sees it (no program loaded)."""
    with tempfile.TemporaryDirectory(prefix="cudaship-diag-") as tmp:
        out = Path(tmp) / "env.json"
        command = [python or sys.executable, str(Path(runner_child.__file__).resolve())]
        command += ["--json-out", str(out), "--device", device, "--diagnose"]
        try:
            subprocess.run(
                command, env=child_environment(), capture_output=True, timeout=timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return _environment(_read_result(out).get("environment"))
