"""Records of the program layer: how a program package checked and ran.

What a program package holds (:class:`~cudaship.inspection.program_records.ProgramInfo`) and where it came
from (:class:`~cudaship.inspection.program_records.Provenance`) are records of the reader that makes them,
:mod:`cudaship.inspection.program_records`. Checks return :class:`CheckReport`; runs return
:class:`RunReport`. Renderers in ``cudaship.render.program_*`` print them.
"""

from __future__ import annotations

from dataclasses import dataclass

from cudaship.inspection.program_records import ProgramInfo, Provenance
from cudaship.records.binary import FileFormat
from cudaship.records.files import FileReport
from cudaship.records.findings import CheckResult, Status

#: The family (mechanism) of every :class:`~cudaship.records.findings.CheckResult` ``program check`` returns.
FAMILY = "program"


def outcome(item: CheckResult) -> str:
    """``program check``'s word for a result: ``pass``, ``skip`` (not decidable with what was given: no
    train, no GPU named), ``fail`` (a failure of severity error) or ``warn`` (a failure of severity warning:
    it passes, but a person should know, e.g. an 'a' cubin runs on one GPU generation only)."""
    if item.status is not Status.FAIL:
        return str(item.status.value)
    return "fail" if item.is_error else "warn"


@dataclass(frozen=True)
class Target:
    """What the program is checked against (from the options, a wheel or this machine)."""

    train: str | None = None  #: ``13.2``
    train_source: str | None = None  #: ``--train``, the wheel's file name, ...
    capability: str | None = None  #: ``8.6``
    gpu: str | None = None  #: GPU name, when known
    driver: str | None = None
    platform: str | None = None  #: ``linux-x86_64``
    runtime: str | None = None  #: a label for the table: the wheel's file name, ``torch 2.11.0+cu130``


@dataclass(frozen=True)
class CheckReport:
    directory: str
    provenance: Provenance | None
    program: ProgramInfo | None
    target: Target
    items: tuple[CheckResult, ...]  #: one per check (``name``: package, reference, platform, train, ...)

    @property
    def passed(self) -> bool:
        return not any(i.is_error for i in self.items)

    @property
    def counts(self) -> tuple[int, int]:
        """(checks passed, checks decided): warnings pass, skips are not counted."""
        decided = [i for i in self.items if i.status is not Status.SKIP]
        return sum(not i.is_error for i in decided), len(decided)


@dataclass(frozen=True)
class Environment:
    """What a person needs when a run fails: the machine's GPU, driver and runtimes."""

    python: str | None = None
    torch: str | None = None
    torch_cuda: str | None = None  #: torch.version.cuda
    gpu: str | None = None
    capability: str | None = None
    driver: str | None = None
    driver_cuda: str | None = None  #: the newest CUDA the driver supports (``13.0``)
    memory_pools: bool | None = None  #: CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED
    cudart: tuple[str, ...] = ()  #: libcudart files found beside torch / in the NVIDIA wheels
    compiler_on_path: str | None = None  #: a C++ compiler the run could see (None: none, as intended)
    error: str | None = None  #: why the probe could not say more


@dataclass(frozen=True)
class RunReport:
    directory: str
    provenance: Provenance | None
    ok: bool
    run_directory: str  #: where it ran (the non-ASCII copy when asked)
    runs: int
    tolerance: float
    max_abs_diff: float | None = None
    load_s: float | None = None
    latency_ms: float | None = None  #: median of the program
    eager_latency_ms: float | None = None  #: median of eager in the same process
    failure: str | None = None  #: one line: what failed (the signal for a crash)
    signal: str | None = None  #: ``SIGSEGV`` when the child died of a signal
    exit_code: int | None = None
    environment: Environment | None = None
    stderr_tail: str | None = None  #: the child's last lines, for a crash
    loader: str | None = None  #: the loader API used
    notes: tuple[str, ...] = ()


_LOCALE_SYMBOL = "_ZNSt6locale"


def libstdcxx_copy(report: FileReport | None) -> int:
    """How many ``std::locale`` symbols a library defines while needing no ``libstdc++`` (0: not a copy).

    A library linked with ``-static-libstdc++`` carries its own C++ runtime. Loaded into a process that has
    ``libstdc++.so.6`` already (any Python with torch), its references to exported libstdc++ symbols bind to
    the process's copy while its inlined code uses its own: the two halves disagree about the locale's
    facets and the first ``std::regex`` crashes (seen on the H200: see docs/program.md).
    """
    if report is None or report.host is None or report.format is not FileFormat.ELF:
        return 0
    if any(imp.library.startswith("libstdc++") for imp in report.host.imports):
        return 0
    return sum(1 for name in report.host.exports if name.startswith(_LOCALE_SYMBOL))
