"""The wheels of a survey spread over workers, and one survey run from the selection to the dataset.

:func:`run` hands every wheel to :func:`cudaship.survey.work.survey_wheel` on an engine and writes the
outcomes as parts (:mod:`cudaship.survey.store`):

- ``local`` (the default): a process pool (:class:`concurrent.futures.ProcessPoolExecutor`, workers from a
  fork server, or spawned where there is none). At most :data:`IN_FLIGHT` x workers wheels are submitted at
  a time (back-pressure: a list of 100,000 wheels is not queued at once); a wheel whose outcome failed on
  the network (:attr:`WheelOutcome.transient`) is tried once more, then its error row is kept; when a worker
  process dies, the wheels in flight run again on a new pool, each alone, so that the one that ends its
  worker is known: it is tried once more, then its error row is kept (the others are not charged).
  Outcomes are written in parts every :data:`~cudaship.survey.store.PART_WHEELS` wheels or
  :data:`~cudaship.survey.store.PART_SECONDS` seconds. Ctrl-C writes what completed as a part, ends the
  workers and raises KeyboardInterrupt (the CLI answers it with one line and exit 130).
- ``dask`` and ``ray``: :mod:`cudaship.survey.engine_dask` and :mod:`cudaship.survey.engine_ray`, with the
  same signature, imported only when named; a missing module or extra is one line naming the pip extra.

:func:`survey` is one run: which of the selected wheels no complete part holds yet (``retry_errors``: also
those whose rows say they could not be read), the run recorded in the manifest (interrupted or complete),
the engine, then the consolidated dataset; it returns the run's :class:`SurveySummary`. This module never
prints.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudaship.archive.pool import _end_processes, _ignore_interrupt, _start_fork_server, worker_count
from cudaship.errors import UsageError
from cudaship.survey import store
from cudaship.survey.records import SurveyOptions, WheelOutcome, WheelRef

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future

    from cudaship.survey.sources import Filters, Selection

#: the engines ``--engine`` takes, the default first
ENGINES = ("local", "dask", "ray")
#: wheels submitted to the local pool at once, per worker (back-pressure)
IN_FLIGHT = 2
#: seconds between two looks at the pool while waiting (Ctrl-C and the part deadline are seen this often)
POLL_S = 0.25
#: tries of a wheel whose outcome failed on the network, or whose worker died (the first included)
TRIES = 2
#: what an engine's extra installs, imported by :func:`check_engine` before any page is read (Ray's module
#: answers for itself)
REQUIRES: dict[str, tuple[str, ...]] = {
    "dask": ("dask", "dask.dataframe", "distributed", "pandas", "pyarrow")
}
#: modules the fork server imports once for every worker
PRELOAD = ("cudaship.survey.work",)

Work = Callable[[WheelRef, SurveyOptions], WheelOutcome]
OnOutcome = Callable[[WheelOutcome], None]


def extra_of(engine: str) -> str:
    """The pip command that installs what ``engine`` needs."""
    return f"pip install 'cudaship[{engine}]'"


def default_work() -> Work:
    """The per-wheel work every engine runs (imported when a run starts)."""
    module = importlib.import_module("cudaship.survey.work")  # by name: written beside this module
    work: Work = module.survey_wheel
    return work


def run(
    refs: Iterable[WheelRef],
    options: SurveyOptions,
    dest: str | Path,
    *,
    engine: str = "local",
    workers: int | None = None,
    on_outcome: OnOutcome | None = None,
    run_id: str | None = None,
    part_wheels: int = store.PART_WHEELS,
    part_seconds: float = store.PART_SECONDS,
    work: Work | None = None,
    address: str | None = None,
) -> dict[str, int]:
    """Survey ``refs`` on ``engine`` into the parts of ``dest``; ``on_outcome`` is called in this process
    with every wheel's final outcome. ``address``: a Dask scheduler (``--engine dask``; None: a local
    cluster). Returns the engine's counts (``retried``, ``parts``; an engine may give fewer)."""
    if engine == "local":
        if address is not None:
            raise UsageError("--scheduler goes with --engine dask")
        return run_local(
            refs,
            options,
            dest,
            workers=workers,
            on_outcome=on_outcome,
            run_id=run_id,
            part_wheels=part_wheels,
            part_seconds=part_seconds,
            work=work,
        )
    module = check_engine(engine)
    more: dict[str, Any] = {"address": address} if address is not None else {}
    result = module.run(
        refs,
        options,
        dest,
        workers=workers,
        on_outcome=on_outcome,
        run_id=run_id,
        part_wheels=part_wheels,
        part_seconds=part_seconds,
        work=work,
        **more,
    )
    return dict(result) if isinstance(result, dict) else {}


def check_engine(engine: str) -> Any:
    """The module of the engine ``engine`` (``dask``, ``ray``), imported; UsageError (one line naming the pip
    extra, exit 2) when it or what it needs is not installed."""
    if engine not in ENGINES or engine == "local":
        raise UsageError(f"--engine {engine!r}: not one of {', '.join(e for e in ENGINES if e != 'local')}")
    module_name = f"cudaship.survey.engine_{engine}"
    try:
        module = importlib.import_module(module_name)
        for name in REQUIRES.get(engine, ()):  # its extra, before any page is read
            importlib.import_module(name)
        return module
    except ModuleNotFoundError as e:
        if e.name == module_name:
            what = "this version of cudaship has no such engine"
        elif e.name is not None and e.name.split(".")[0] in (engine, *REQUIRES.get(engine, ())):
            what = f"{e.name} is not installed"
        else:
            raise
        raise UsageError(f"--engine {engine}: {what}: {extra_of(engine)}") from None


# --- the local engine -------------------------------------------------------------------------------------


def _start_pool(count: int) -> Executor:
    """``count`` worker processes that ignore Ctrl-C (the command answers it): from a fork server that
    imports the survey's modules once, spawned where there is none. Never forked from this process (it may
    hold threads: the progress bar, the HTTP client's)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if "forkserver" in multiprocessing.get_all_start_methods():
        context: Any = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(PRELOAD))
        _start_fork_server()  # with SIGINT blocked: neither the server nor its workers take Ctrl-C
    else:  # pragma: no cover - Windows, macOS without a fork server
        context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=count, mp_context=context, initializer=_ignore_interrupt)


def _failed(ref: WheelRef, error: str) -> WheelOutcome:
    return WheelOutcome(ref, [store.wheel_row(ref, error)], error=error)


def run_local(
    refs: Iterable[WheelRef],
    options: SurveyOptions,
    dest: str | Path,
    *,
    workers: int | None = None,
    on_outcome: OnOutcome | None = None,
    run_id: str | None = None,
    part_wheels: int = store.PART_WHEELS,
    part_seconds: float = store.PART_SECONDS,
    work: Work | None = None,
) -> dict[str, int]:
    """The local engine (see the module's docstring)."""
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    task = work or default_work()
    count = worker_count(workers)
    writer = store.PartWriter(
        dest, run_id or store.new_run_id(), every_wheels=part_wheels, every_s=part_seconds
    )
    pending: Iterator[WheelRef] = iter(refs)
    inflight: dict[Future[WheelOutcome], tuple[WheelRef, int]] = {}
    suspects: deque[tuple[WheelRef, int]] = deque()  #: wheels to run alone (a worker died among them)
    retried = 0
    executor = _start_pool(count)

    def submit(ref: WheelRef, tries: int) -> None:
        inflight[executor.submit(task, ref, options)] = (ref, tries)

    def finish(outcome: WheelOutcome) -> None:
        writer.add(outcome)
        if on_outcome is not None:
            on_outcome(outcome)

    try:
        exhausted = False
        while True:
            if suspects:  # after a worker died among several wheels: each runs alone until known
                if not inflight:
                    submit(*suspects.popleft())
            else:
                while not exhausted and len(inflight) < IN_FLIGHT * count:
                    ref = next(pending, None)
                    if ref is None:
                        exhausted = True
                    else:
                        submit(ref, 1)
            if not inflight:
                break
            finished, _ = wait(list(inflight), timeout=POLL_S, return_when=FIRST_COMPLETED)
            broken: list[tuple[WheelRef, int]] = []
            for future in finished:
                ref, tries = inflight.pop(future)
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    broken.append((ref, tries))
                    continue
                except Exception as e:  # the task could not run (not picklable, ...): that wheel's error
                    outcome = _failed(ref, f"the survey of this wheel failed: {type(e).__name__}: {e}")
                if outcome.error is not None and outcome.transient and tries < TRIES:
                    retried += 1
                    submit(ref, tries + 1)
                    continue
                finish(outcome)
            if broken:  # a worker died: every wheel in flight failed with it, on a pool that is gone
                broken += [inflight.pop(f) for f in list(inflight)]
                _end_processes(executor)
                executor = _start_pool(count)
                retried += len(broken)
                if len(broken) > 1:  # which one ended it is not known: each runs again, alone
                    suspects.extend(sorted(broken, key=lambda b: b[0].key))
                else:  # alone, it ended its worker: once more, then its error row
                    ((ref, tries),) = broken
                    if tries < TRIES:
                        suspects.append((ref, tries + 1))
                    else:
                        retried -= 1
                        finish(_failed(ref, "a worker process died while surveying this wheel"))
            if writer.due():
                writer.flush()
        writer.flush()
    except BaseException:  # Ctrl-C, or an error writing: what completed is kept, the workers end now
        try:
            writer.flush()
        finally:
            _end_processes(executor)
        raise
    executor.shutdown(wait=True)
    return {"retried": retried, "parts": writer.parts}


# --- one survey run ---------------------------------------------------------------------------------------


@dataclass
class SurveySummary:
    """One run of ``cudaship survey``: what was selected, skipped, surveyed; the dataset after it."""

    dest: str
    run: str
    engine: str
    workers: int
    state: str = "running"  #: running, complete, interrupted
    selected: int = 0  #: wheels the sources and filters chose
    skipped: int = 0  #: of those, already in the dataset (earlier runs)
    surveyed: int = 0  #: wheels this run surveyed (failed ones included)
    failed: int = 0  #: of those, wheels that could not be read (an error row)
    retried: int = 0  #: extra tries (network failures, a worker that died)
    libraries: int = 0  #: native libraries this run read (rows naming a library)
    rows: int = 0  #: rows this run wrote
    fetched_bytes: int = 0  #: bytes this run's wheels fetched (ranges, members)
    page_bytes: int = 0  #: bytes of index pages
    selected_bytes: int = 0  #: the sources' size of the selected wheels (known sizes)
    surveyed_bytes: int = 0  #: the sources' size of the wheels this run surveyed
    unsized: int = 0  #: selected wheels of unknown size
    cached_members: int = 0  #: native members answered by the member cache
    read_members: int = 0  #: native members fetched and read
    listed: int = 0  #: wheel files the sources named
    yanked: int = 0
    filtered: int = 0
    duplicates: int = 0
    undated: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)  #: files of the sources left out, and why
    damaged: list[str] = field(default_factory=list)  #: parts skipped (their wheels surveyed again)
    dataset_wheels: int = 0
    dataset_rows: int = 0
    dataset_libraries: int = 0
    dataset_failed: int = 0
    files: list[str] = field(default_factory=list)  #: the consolidated files written

    def record(self) -> dict[str, Any]:
        """The run as the manifest keeps it."""
        return dataclasses.asdict(self)


def survey(
    selection: Selection,
    options: SurveyOptions,
    dest: str | Path,
    *,
    sources: list[dict[str, Any]],
    filters: Filters,
    retry_errors: bool = False,
    engine: str = "local",
    workers: int | None = None,
    on_start: Callable[[list[WheelRef]], None] | None = None,
    on_outcome: OnOutcome | None = None,
    part_wheels: int = store.PART_WHEELS,
    part_seconds: float = store.PART_SECONDS,
    work: Work | None = None,
    address: str | None = None,
) -> SurveySummary:
    """One run over ``selection`` into ``dest`` (see the module's docstring); ``on_start`` is given the
    wheels to survey before the engine starts."""
    started = time.monotonic()
    root = store.survey_dir(dest)
    done = store.scan(root)
    skip = done.keys - done.failed if retry_errors else done.keys
    todo = [r for r in selection.refs if r.key not in skip]
    summary = SurveySummary(
        dest=str(root),
        run=store.new_run_id(),
        engine=engine,
        workers=worker_count(workers),
        selected=len(selection.refs),
        skipped=len(selection.refs) - len(todo),
        page_bytes=selection.page_bytes,
        selected_bytes=selection.total_bytes,
        surveyed_bytes=sum(r.size or 0 for r in todo),
        unsized=selection.unsized,
        listed=selection.listed,
        yanked=selection.yanked,
        filtered=selection.filtered,
        duplicates=selection.duplicates,
        undated=selection.undated,
        problems=list(selection.problems),
        damaged=list(done.damaged),
    )
    asked = {
        "sources": sources,
        "filters": filters.as_json(),
        "options": dataclasses.asdict(options),
        "retry_errors": retry_errors,
    }
    started_at = store.now_text()

    def record() -> dict[str, Any]:
        summary.seconds = round(time.monotonic() - started, 3)
        return {"start": started_at, "end": None, **asked, **summary.record()}

    store.update_run(root, record(), sources=sources, filters=asked["filters"], options=asked["options"])

    def count(outcome: WheelOutcome) -> None:
        summary.surveyed += 1
        summary.failed += outcome.error is not None
        rows = store.outcome_rows(outcome)
        summary.rows += len(rows)
        summary.libraries += sum(1 for r in rows if r["library"] is not None)
        summary.fetched_bytes += outcome.fetched_bytes
        summary.cached_members += outcome.cached_members
        summary.read_members += outcome.read_members
        if on_outcome is not None:
            on_outcome(outcome)

    if on_start is not None:
        on_start(todo)
    try:
        counts = run(
            todo,
            options,
            root,
            engine=engine,
            workers=workers,
            on_outcome=count,
            run_id=summary.run,
            part_wheels=part_wheels,
            part_seconds=part_seconds,
            work=work,
            address=address,
        )
    except KeyboardInterrupt:
        summary.state = "interrupted"
        store.update_run(root, {**record(), "end": store.now_text()})
        raise
    summary.retried = counts.get("retried", 0)
    summary.state = "complete"
    dataset = store.consolidate(root)
    summary.dataset_wheels = dataset.wheels
    summary.dataset_rows = dataset.rows
    summary.dataset_libraries = dataset.libraries
    summary.dataset_failed = dataset.failed
    summary.files = list(dataset.files)
    summary.damaged = sorted(set(summary.damaged) | set(dataset.damaged))
    store.update_run(
        root,
        {**record(), "end": store.now_text()},
        dataset={
            "wheels": dataset.wheels,
            "rows": dataset.rows,
            "libraries": dataset.libraries,
            "failed": dataset.failed,
            "files": [Path(f).name for f in dataset.files],
        },
    )
    return summary
