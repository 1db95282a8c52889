"""cudaship: make CUDA binaries ship right.

The public API is what ``__all__`` lists (see docs/api.md): :func:`inspect`, :func:`gpus`, :func:`audit` and
:func:`repair`, the records they return, and the errors they raise. Every other module and name is private
and may change between releases.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "AuditReport",
    "CudashipError",
    "GpuReport",
    "InputError",
    "InspectReport",
    "ProviderOptions",
    "RepairReport",
    "audit",
    "gpus",
    "inspect",
    "repair",
]

if TYPE_CHECKING:
    from cudaship.analysis.gpus import GpuReport
    from cudaship.api import InputError, audit, gpus, inspect, repair
    from cudaship.checks.records import AuditReport
    from cudaship.errors import CudashipError
    from cudaship.inspection.report import InspectReport
    from cudaship.providers.options import ProviderOptions
    from cudaship.repair.records import RepairReport


def __getattr__(name: str) -> Any:
    """The API's names, imported on first use: ``import cudaship`` (which every ``import cudaship.x`` runs
    first, the CLI's start included) stays as cheap as this file; only a caller of the API pays for
    the readers and checks it needs (a function-level import for start-up time)."""
    if name in __all__:
        from cudaship import api

        return getattr(api, name)
    raise AttributeError(f"module 'cudaship' has no attribute {name!r}")


class _Cudaship(types.ModuleType):
    """This module's type. ``cudaship.repair`` is the API's function, yet ``cudaship/repair/`` is also a
    package: importing it (``from cudaship.repair.run import ...``) sets this module's attribute ``repair``
    to the package, which would hide the function. A property on the type wins over that attribute; the
    package stays where imports find it, ``sys.modules["cudaship.repair"]``. (So name it by import, never
    as ``cudaship.repair.x`` attributes or patch strings.)"""

    @property
    def repair(self) -> Any:
        return __getattr__("repair")

    @repair.setter
    def repair(self, package: types.ModuleType) -> None:
        pass  # the import system binding the package: it stays in sys.modules


sys.modules[__name__].__class__ = _Cudaship
