"""``cudaship repair``: point a CUDA wheel at NVIDIA's PyPI wheels instead of the CUDA libraries it vendors.

* :mod:`~cudaship.repair.records` — the plan and the report (frozen dataclasses).
* :mod:`~cudaship.repair.plan` — what to change, decided over the audit's view of the wheel (pure).
* :mod:`~cudaship.repair.requirements` — the requirements to add, shared by the Linux and Windows plans.
* :mod:`~cudaship.repair.windows` — the Windows plan: PE import names renamed, the DLL-directory bootstrap.
* :mod:`~cudaship.repair.elfedit` — DT_NEEDED and RUNPATH edits: in place when they fit, else patchelf.
* :mod:`~cudaship.repair.elfinplace` — the edit in place, in the existing ``.dynstr`` (bounds-checked).
* :mod:`~cudaship.repair.zipwrite` — the repaired wheel, written deterministically, streamed.
* :mod:`~cudaship.repair.run` — one wheel in, one repaired wheel out (or the plan, with ``--dry-run``).
* :mod:`~cudaship.repair.excludes` — exclude flags for auditwheel and delvewheel.
"""
