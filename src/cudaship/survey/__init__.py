"""``cudaship survey``: every CUDA wheel of an index, a project list, a file of wheel URLs or a wheelhouse
read into one dataset (one row per wheel x library). See docs/survey.md.

- :mod:`~cudaship.survey.records`: the plain records every module passes on (:class:`WheelRef`, the row).
- :mod:`~cudaship.survey.sources`: which wheels (index pages, URL lists, wheelhouses, filters).
- :mod:`~cudaship.survey.remote`: one wheel's central directory and chosen members by HTTP range request,
  and the member cache keyed by RECORD's sha256.
- :mod:`~cudaship.survey.work`: one wheel surveyed (the existing scan and audit), rows out.
- :mod:`~cudaship.survey.store`: the dataset on disk, resumable (JSON Lines parts, Parquet).
- :mod:`~cudaship.survey.engine`: the wheels spread over a local process pool, Dask or Ray.
"""
