"""Records of the loader oracle: what was asked of the real loader (:class:`Probe`), what one child process
saw (:class:`ProbeResult`) and everything a run of probes observed (:class:`Observation`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum


class StepKind(str, Enum):
    IMPORT = "import"  #: ``importlib.import_module(target)``: the package's own preloading runs
    DLOPEN = "dlopen"  #: ``ctypes.CDLL(target)``: the loader's ``dlopen`` with RTLD_NOW
    #: ``module:function``: call a package's documented loader function (``libkvikio.load_library()``) with no
    #: arguments; a module that does not define it is a success that says so
    CALL = "call"


@dataclass(frozen=True)
class Step:
    kind: StepKind
    target: str  #: a module name (import) or a library path (dlopen)

    @property
    def label(self) -> str:
        if self.kind is StepKind.CALL:
            module, _, function = self.target.partition(":")
            return f"call {module}.{function}()"
        return f"{self.kind.value} {self.target}"


@dataclass(frozen=True)
class Probe:
    """One fresh child process: ``before`` run first, in order (their failures are recorded and the child
    goes on), then ``step``, the probe's subject. ``dlopen lib.so`` after ``import pkg`` is how a library is
    loaded with the package's preloading done."""

    step: Step
    before: tuple[Step, ...] = ()

    @classmethod
    def import_(cls, module: str, *, before: tuple[Step, ...] = ()) -> Probe:
        return cls(Step(StepKind.IMPORT, module), before)

    @classmethod
    def dlopen(cls, path: str, *, after_imports: tuple[str, ...] = (), calls: tuple[str, ...] = ()) -> Probe:
        """``dlopen path`` after importing ``after_imports`` and calling ``calls`` (``module:function``)."""
        before = (
            *(Step(StepKind.IMPORT, m) for m in after_imports),
            *(Step(StepKind.CALL, c) for c in calls),
        )
        return cls(Step(StepKind.DLOPEN, path), tuple(before))

    @property
    def label(self) -> str:
        if not self.before:
            return self.step.label
        return f"{self.step.label} (after {', '.join(s.label for s in self.before)})"


@dataclass(frozen=True)
class Needed:
    """One DT_NEEDED entry of a loaded object and the loaded object that satisfies it (glibc reuses a loaded
    object whose SONAME, or a name it was loaded by, equals the entry). ``path`` None: no loaded object
    matches (a name the loader found by file identity, or the object is not an ELF file the reader knows)."""

    name: str
    path: str | None
    how: str | None = None  #: ``soname`` or ``name``: what matched


@dataclass(frozen=True)
class LoadedObject:
    """One object mapped in a child, in the loader's order (``dl_iterate_phdr``)."""

    name: str  #: the name the loader keeps for it (``l_name``: the path it opened)
    path: str  #: its real path (links resolved)
    soname: str | None = None
    needed: tuple[Needed, ...] = ()
    unreadable: str | None = None  #: why its ELF header could not be read (then soname/needed are empty)


@dataclass(frozen=True)
class StepResult:
    step: Step
    ok: bool
    message: str | None = None  #: the loader's own message (dlerror text, the exception line)
    #: objects mapped right before this step ran (real paths), so "already loaded when X ran" can be said
    loaded_before: tuple[str, ...] = ()
    seconds: float | None = None


@dataclass(frozen=True)
class ProbeResult:
    """What one child saw. ``ok``: the child finished and the probe's step succeeded. A child killed by a
    signal (``signal``: ``SIGSEGV``) or by the timeout is a result, with the step it was at."""

    probe: Probe
    ok: bool
    message: str | None = None  #: why not ok: the loader's message, the signal, the timeout
    steps: tuple[StepResult, ...] = ()  #: the steps that finished, ``before`` ones first
    objects: tuple[LoadedObject, ...] = ()  #: every object mapped at the end (or at the last report)
    timed_out: bool = False
    signal: str | None = None
    exit_code: int | None = None
    stage: str | None = None  #: the step the child was at when it stopped (crash, timeout)
    stderr_tail: str | None = None
    seconds: float | None = None  #: the child's wall time, as the parent measured it
    listing_us: int | None = None  #: microseconds the child spent listing the mapped objects
    #: run in a child forked after a shared interpreter ran ``before`` (``observe(share_imports=True)``)
    forked: bool = False

    @property
    def result(self) -> StepResult | None:
        """The probe's own step's result (None when the child never got through it)."""
        for s in self.steps:
            if s.step == self.probe.step:
                return s
        return None

    def object(self, path: str) -> LoadedObject | None:
        for o in self.objects:
            if o.path == path:
                return o
        return None

    @property
    def loaded(self) -> tuple[str, ...]:
        return tuple(o.path for o in self.objects)


@dataclass(frozen=True)
class Observation:
    """Every probe's result, in the order asked, and how the children were run."""

    python: str  #: the interpreter the children ran
    results: tuple[ProbeResult, ...]
    #: the toolkit stub linked as ``libcuda.so.1`` on the children's LD_LIBRARY_PATH (no driver here), or None
    stub_libcuda: str | None = None
    driver: str | None = None  #: ``present``, ``stub`` or ``absent``
    method: str = "dl_iterate_phdr"  #: how the children listed their mapped objects
    notes: tuple[str, ...] = field(default=())

    def __iter__(self) -> Iterator[ProbeResult]:
        return iter(self.results)

    @property
    def needed(self) -> dict[str, dict[str, str | None]]:
        """Per loaded object (real path), each DT_NEEDED name -> the loaded path that satisfied it, over all
        probes (the first probe that loaded the object wins; the children may differ only when their
        preloading differs, and each probe's own map is in :attr:`ProbeResult.objects`)."""
        out: dict[str, dict[str, str | None]] = {}
        for r in self.results:
            for o in r.objects:
                if o.path not in out:
                    out[o.path] = {n.name: n.path for n in o.needed}
        return out
