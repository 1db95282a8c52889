"""Providers: the distributions a wheel's declared requirements install, and the files each one installs.

A wheel's native libraries import libraries that other distributions provide once ``pip install`` has run:
NVIDIA's component wheels (directly or through the ``cuda-toolkit[...]`` metapackage), torch for its
extensions, ... This package answers "which distribution installs which file, reached through which
requirement" for a wheel's target platform, from real sources in order: an installed environment
(``--env``), a wheelhouse (``--find-links``), the package index (PEP 691 JSON, PEP 658 metadata, the wheel's
central directory read with HTTP range requests), and, offline only, a knowledge table.

* :mod:`.records` — the plain records (:class:`~.records.Distribution`, :class:`~.records.Provided`, ...).
* :mod:`.sources` — where distributions come from; :mod:`.index` and :mod:`.lazywheel` — the package index.
* :mod:`.closure` — expanding requirements (markers for the target platform, extras, transitively).
"""
