"""The survey's plain records: which wheel (:class:`WheelRef`), what one wheel gave (:class:`WheelOutcome`),
and the dataset's row (:data:`ROW_FIELDS`, one row per wheel x native library).

These are the contract between the survey's modules (sources -> work -> store -> engine -> report): every
module reads and writes these and nothing else, so a row is the same whichever engine produced it.
A row is a plain ``dict`` (JSON-able, Arrow-able) whose keys are exactly :data:`ROW_FIELDS`; its types are
:data:`ROW_TYPES` (the Parquet schema is built from them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class WheelRef:
    """One wheel to survey: where it is and what the index says of it."""

    project: str  #: normalized project name (PEP 503)
    version: str
    filename: str
    url: str  #: ``https://...``, ``http://127.0.0.1/...`` or ``file:///...`` (a wheelhouse)
    size: int | None = None  #: bytes, from the index (None: unknown until fetched)
    sha256: str | None = None  #: the index's hash (hex), when it gives one
    upload_time: str | None = None  #: PEP 700 ISO-8601, when the index gives one

    @property
    def key(self) -> str:
        """What identifies the wheel across runs: its sha256 when known, else its URL."""
        return f"sha256:{self.sha256}" if self.sha256 else f"url:{self.url}"


@dataclass
class WheelOutcome:
    """What surveying one wheel gave: its rows, or the one-line reason it could not be read."""

    ref: WheelRef
    rows: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  #: the wheel could not be read at all (its rows then hold one error row)
    #: with ``error``: it came from the network (no answer, a broken connection, 408/429/5xx: as
    #: :attr:`cudaship.http.Unavailable.transient` says), so an engine tries the wheel once more
    transient: bool = False
    fetched_bytes: int = 0  #: bytes transferred for this wheel (ranges, whole members)
    cached_members: int = 0  #: native members whose facts came from the member cache (not fetched)
    read_members: int = 0  #: native members fetched and read


#: (name, type) of every column, in order. Types: ``str``, ``int``, ``bool``, ``list[str]``, and
#: ``list[arch]`` (records ``{"arch": "sm_90a", "kind": "sass"|"ptx", "bytes": int}``). ``None`` is allowed
#: in every column (unknown or not applicable).
ROW_TYPES: tuple[tuple[str, str], ...] = (
    # the wheel
    ("wheel_key", "str"),  #: :attr:`WheelRef.key`: what a resumed run skips
    ("project", "str"),
    ("version", "str"),
    ("filename", "str"),
    ("url", "str"),
    ("wheel_sha256", "str"),
    ("wheel_size", "int"),
    ("upload_time", "str"),
    ("os", "str"),  #: linux, windows, macos, any
    ("machine", "str"),  #: x86_64, aarch64, ...
    ("python_tag", "str"),
    ("train", "str"),  #: the CUDA train the audit reads for the wheel (``12.8``), None: none found
    ("train_source", "str"),
    ("declared_nvidia", "list[str]"),  #: Requires-Dist on NVIDIA CUDA wheels (wheel platform)
    ("audit_verdict", "str"),  #: pass | warn | fail | error (the audit could not run)
    ("audit_errors", "int"),
    ("audit_warnings", "int"),
    ("audit_failed", "list[str]"),  #: names of the checks that failed (error severity)
    ("cuda_code", "bool"),  #: the wheel carries device code or links a CUDA library
    ("native_libraries", "int"),  #: native members of the wheel (all rows of a wheel repeat it)
    # the library (None for a wheel's single row when it has no native member)
    ("library", "str"),  #: path inside the wheel
    ("library_sha256", "str"),
    ("library_size", "int"),  #: uncompressed bytes
    ("format", "str"),  #: elf, pe, macho, cubin, fatbin, ...
    ("runtime_linkage", "str"),  #: none | static | dynamic (``cudart`` linked how)
    ("cudart_major", "int"),
    ("sass", "list[str]"),  #: ``sm_90``, ``sm_90a``, ``sm_100f``: every SASS arch with its variant, sorted
    ("ptx", "list[str]"),  #: ``compute_90`` ...
    ("ptx_isa", "list[str]"),  #: PTX ISA versions, ``8.8`` ...
    ("arch_bytes", "list[arch]"),  #: bytes of device code per arch and kind
    ("compressed", "bool"),  #: any fatbin entry compressed
    #: the driver ``cudaship gpus`` names for this library on the default GPUs of the wheel's machine (the
    #: newest any of its verdicts needs); None for another OS's file or a library without device code
    ("min_driver_linux", "str"),
    ("min_driver_windows", "str"),
    ("vendored_nvidia", "str"),  #: the NVIDIA wheel providing this vendored copy
    ("error", "str"),  #: why this library (or the whole wheel) could not be read
)

ROW_FIELDS: tuple[str, ...] = tuple(name for name, _ in ROW_TYPES)


def empty_row() -> dict[str, Any]:
    """A row with every column present and None."""
    return dict.fromkeys(ROW_FIELDS)


@dataclass(frozen=True)
class SurveyOptions:
    """How every wheel is surveyed; picklable (it travels to worker processes, Dask and Ray workers)."""

    cache_dir: str  #: the member cache (facts by member sha256) and the HTTP cache live under it
    #: run the audit for ``audit_*`` columns; False leaves them None (a faster, inspect-only dataset)
    audit: bool = True
    #: where the audit looks up declared requirements: None is cudaship's knowledge table only (no network);
    #: an index URL asks that index, as ``cudaship audit --index-url`` does
    requirements_index: str | None = None
    #: hosts the wheels' URLs may point at (None: the host of each wheel's own URL)
    hosts: tuple[str, ...] | None = None
    deadline_s: float = 3600.0  #: the most one wheel may take, network included
    details: bool = False  #: read every cubin's toolkit version (slower)
