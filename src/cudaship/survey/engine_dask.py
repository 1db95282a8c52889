"""``cudaship survey --engine dask``: the wheels spread over a Dask cluster, the parts written by Dask's own
Parquet writer (:func:`dask.dataframe.to_parquet`). Needs the ``dask`` extra (``pip install
'cudaship[dask]'``: dask, distributed, pandas, numpy; pyarrow from the ``survey`` extra).

Why Dask and not Ray: docs/survey.md, "Engine" (measured by ``benchmarks/survey_engines.py``).

How a run goes (:func:`run`):

- The wheels are cut into parts of ``part_wheels``; each part is one task (:func:`survey_part`: the per-wheel
  work, :func:`cudaship.survey.work.survey_wheel`, on each of its wheels) whose rows Dask writes as one
  Parquet file (``to_parquet``, the schema :func:`cudaship.survey.store.arrow_schema`) into a staging
  directory under ``DEST/parts/`` (hidden: readers skip it). When a part's file is written, this process
  renames it to ``DEST/parts/<run>-<n>.parquet`` (complete wheels, whole) and hands each outcome to
  ``on_outcome``. A run stopped at any moment leaves only complete parts; the next run skips their wheels.
- Back-pressure is Dask's: every part is handed to the scheduler at once (a few hundred bytes each), and the
  scheduler queues them (``distributed.scheduler.worker-saturation``) and sends a worker a new part as it
  finishes one; a worker that nears its memory limit is paused by Dask's memory manager.
- Retries are Dask's: a part's tasks are computed with ``retries`` (:data:`RETRIES`): a part that raises is
  run again; a part whose wheel failed on the network (``WheelOutcome.transient``) raises, so Dask runs it
  again; a worker that dies is replaced by its nanny and its tasks are rescheduled by the scheduler (up to
  ``distributed.scheduler.allowed-failures`` deaths). A part still failing on the network after its retries is
  computed once more keeping its wheels' error rows (a later run with ``--retry-errors`` tries them again).
- ``address`` names a running cluster's scheduler (``tcp://host:8786``; ``dask scheduler`` and ``dask worker``
  start one): its workers need cudaship (with this extra) and must see ``DEST`` at the same path (a shared
  file system). None: a local cluster of ``workers`` processes, one thread each, started and stopped here.

This module never prints; Dask's own logs are kept at errors only.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from cudaship.archive.pool import worker_count
from cudaship.errors import UsageError
from cudaship.safe_write import make_owned_dir, place, remove_owned
from cudaship.survey.records import SurveyOptions, WheelOutcome, WheelRef, empty_row
from cudaship.survey.store import PARTS, arrow_schema

#: what installs this engine
EXTRA = "pip install 'cudaship[dask]'"
#: wheels in one part (one task, one Parquet file)
PART_WHEELS = 64
#: extra tries Dask gives a part that raised (a network failure, an unexpected error) before it is failed
RETRIES = 1

Work = Callable[[WheelRef, SurveyOptions], WheelOutcome]
OnOutcome = Callable[[WheelOutcome], None]


class TransientPart(Exception):
    """A part with a wheel that failed on the network: raised so that Dask's retries run the part again."""


#: the local cluster's scheduler keeps an HTTP server without a dashboard (health and metrics routes), on
#: port 8787 of every interface unless told; the survey's listens on loopback on a free port, so that two
#: runs (or a user's own cluster) on one machine never meet on 8787 and nothing listens beyond this machine
SCHEDULER_HTTP: dict[str, Any] = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}


def _modules() -> tuple[Any, Any, Any, Any]:
    """dask, dask.dataframe, distributed and pandas; UsageError (one line naming the extra) when missing."""
    try:
        dask = importlib.import_module("dask")
        dd = importlib.import_module("dask.dataframe")
        distributed = importlib.import_module("distributed")
        pd = importlib.import_module("pandas")
        importlib.import_module("pyarrow")
    except ModuleNotFoundError as e:
        raise UsageError(f"--engine dask: {e.name or 'dask'} is not installed: {EXTRA}") from None
    return dask, dd, distributed, pd


def default_work() -> Work:
    """The per-wheel work (imported when a run starts: written beside this module)."""
    work: Work = importlib.import_module("cudaship.survey.work").survey_wheel
    return work


def part_rows(outcome: WheelOutcome) -> list[dict[str, Any]]:
    """The rows a part holds for ``outcome`` (every column, the wheel's key), or one error row when it has
    none (as :func:`cudaship.survey.store.outcome_rows` gives them)."""
    ref = outcome.ref
    rows = outcome.rows
    if not rows:
        rows = [
            {
                "project": ref.project,
                "version": ref.version,
                "filename": ref.filename,
                "url": ref.url,
                "wheel_sha256": ref.sha256,
                "wheel_size": ref.size,
                "upload_time": ref.upload_time,
                "error": outcome.error or "the survey gave no row for this wheel",
            }
        ]
    out = []
    for row in rows:
        full = empty_row()
        full.update({k: v for k, v in row.items() if k in full})
        full["wheel_key"] = ref.key
        out.append(full)
    return out


def survey_part(refs: list[WheelRef], options: SurveyOptions, work: Work, keep_errors: bool) -> list[Any]:
    """The outcomes of one part's wheels (a Dask task); raises :class:`TransientPart` when one failed on the
    network and ``keep_errors`` is False, so that Dask's retries run the part again."""
    outcomes = [work(ref, options) for ref in refs]
    if not keep_errors and any(o.error is not None and getattr(o, "transient", False) for o in outcomes):
        raise TransientPart(", ".join(o.ref.filename for o in outcomes if getattr(o, "transient", False)))
    return outcomes


def part_frame(outcomes: list[WheelOutcome]) -> Any:
    """The rows of a part as a pandas frame of Arrow-backed columns, in the dataset's schema (what
    ``to_parquet`` writes column for column)."""
    import pandas as pd
    import pyarrow as pa

    rows = [row for outcome in outcomes for row in part_rows(outcome)]
    return pa.Table.from_pylist(rows, schema=arrow_schema()).to_pandas(types_mapper=pd.ArrowDtype)


def _written(_written: Any, outcomes: list[WheelOutcome]) -> list[WheelOutcome]:
    """The part's outcomes, once its file is written (a task after the write)."""
    return outcomes


def run(
    refs: Iterable[WheelRef],
    options: SurveyOptions,
    dest: str | os.PathLike[str],
    *,
    workers: int | None,
    on_outcome: OnOutcome | None,
    address: str | None = None,
    run_id: str | None = None,
    part_wheels: int = PART_WHEELS,
    work: Work | None = None,
    retries: int = RETRIES,
    **_ignored: Any,
) -> dict[str, int]:
    """Survey ``refs`` on Dask into the parts of ``dest`` (see the module's docstring); ``on_outcome`` is
    called in this process with every wheel's outcome once its part is in place. Returns ``parts`` (written)
    and ``retried`` (parts run again after their retries on the network, with their error rows kept)."""
    dask, dd, distributed, pd = _modules()

    todo = list(refs)
    if not todo:
        return {"parts": 0, "retried": 0}
    task = work or default_work()
    run_name = run_id or _new_run_id()
    parts_dir = Path(dest) / PARTS
    parts_dir.mkdir(parents=True, exist_ok=True)
    staging = make_owned_dir(parts_dir, f".{run_name}-dask-")
    size = max(1, part_wheels)
    chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
    schema = arrow_schema()
    meta = schema.empty_table().to_pandas(types_mapper=pd.ArrowDtype)

    def part(n: int, keep_errors: bool) -> Any:
        """The part ``n``: its outcomes, returned once Dask's writer has written its file."""
        outcomes = dask.delayed(survey_part, pure=False)(chunks[n], options, task, keep_errors)
        frame = dask.delayed(part_frame, pure=False)(outcomes)
        write = dd.to_parquet(
            dd.from_delayed([frame], meta=meta, verify_meta=False),
            str(staging.path / str(n)),
            schema=schema,
            write_index=False,
            write_metadata_file=False,
            name_function=lambda _i: f"{run_name}-{n:05d}.parquet",
            compute=False,
        )
        return dask.delayed(_written, pure=False)(write, outcomes)

    logging.getLogger("distributed").setLevel(logging.ERROR)
    cluster = None
    if address is None:
        cluster = distributed.LocalCluster(
            n_workers=worker_count(workers),
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            scheduler_kwargs=SCHEDULER_HTTP,
            silence_logs=logging.ERROR,
        )
    client = distributed.Client(cluster if cluster is not None else address, set_as_default=False)

    def move(n: int) -> None:
        name = f"{run_name}-{n:05d}.parquet"
        place(staging.path / str(n) / name, parts_dir / name)

    try:
        with client.as_current():
            written, retried = _collect(client, distributed, part, len(chunks), retries, on_outcome, move)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
        remove_owned(staging.path)
    return {"parts": written, "retried": retried}


def _collect(
    client: Any,
    distributed: Any,
    part: Callable[[int, bool], Any],
    count: int,
    retries: int,
    on_outcome: OnOutcome | None,
    move: Callable[[int], None],
) -> tuple[int, int]:
    """Every part handed to the scheduler, and each one's file moved into place and its outcomes handed on as
    it completes: (parts written, parts run again keeping their error rows)."""
    written = retried = 0
    futures = {client.compute(part(n, False), retries=retries): n for n in range(count)}
    pending = distributed.as_completed(list(futures))
    for future in pending:
        n = futures.pop(future)
        if future.status == "error":
            if isinstance(future.exception(), TransientPart):  # still failing: keep its error rows
                retried += 1
                again = client.compute(part(n, True), retries=retries)
                futures[again] = n
                pending.add(again)
                continue
            future.result()  # anything else: raised here, as Dask raises it
        outcomes = future.result()
        move(n)
        written += 1
        future.release()
        if on_outcome is not None:
            for outcome in outcomes:
                on_outcome(outcome)
    return written, retried


def _new_run_id() -> str:
    import secrets
    import time

    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"


__all__ = ["EXTRA", "TransientPart", "part_rows", "run", "survey_part"]
