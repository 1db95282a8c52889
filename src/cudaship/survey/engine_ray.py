"""``cudaship survey --engine ray``: not offered. The survey's distributed engine is Dask
(:mod:`cudaship.survey.engine_dask`); docs/survey.md, "Engine", gives the measurements and the reason: on the
survey's workload Ray's cluster took three times the memory of Dask's (about 1.6 GB against 0.5 GB for two
workers), its install twice the disk (about 410 MB against 190 MB), and its Parquet writer decides itself how
many files a run's blocks become, where the survey names each part of complete wheels. This module is there so
that ``--engine ray`` answers with that, in one line (exit 2), rather than as an unknown engine."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cudaship.errors import UsageError

#: the one line ``--engine ray`` gives
NOT_OFFERED = (
    "--engine ray: not offered: cudaship's distributed survey runs on Dask, measured lighter on this "
    "workload (docs/survey.md, \"Engine\"); use --engine dask: pip install 'cudaship[dask]'"
)


def run(refs: Iterable[Any], options: Any, dest: Any, **_kwargs: Any) -> dict[str, int]:
    """Always raises :class:`~cudaship.errors.UsageError` (exit 2) with :data:`NOT_OFFERED`."""
    raise UsageError(NOT_OFFERED)
