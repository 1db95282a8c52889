"""One judgement: how each need of a library is met, and the one severity rule over it (issue 32).

Every command that says whether a library's needs are met speaks this vocabulary: ``audit`` (each
import's :class:`~cudaship.checks.resolve.Via` is mapped onto a :class:`Met` by
:func:`cudaship.checks.judgement.judge`),
``repair`` (which reads the audit's :class:`Met` to decide whether to add a requirement, name an extra, or
leave the library alone), ``doctor`` and ``doctor --env`` (an import the environment does not provide is
judged by what the package says it is: a component behind an extra, a variant for another environment).

* :class:`Met`: how a need is met: ``shipped`` in the wheel, by an unconditional ``requirement``, by a
  requirement under an ``extra`` the user chooses, by an undeclared ``host`` package (torch: installed and
  imported first), by a ``variant`` (one library per CUDA version or backend, each for another environment;
  another build of a requirement), ``preloaded`` by a required package's import, by the ``system`` (the C
  library, the interpreter, the distribution), by the NVIDIA ``driver``, or ``missing``.
* ``certain``: whether the static model can compute the answer. It cannot when the package's own code
  decides at run time (a path built from ``importlib.metadata`` into an environment variable and dlopened,
  a library loaded first by Python code, a sibling that must be loaded first, a distribution library the
  user's system may lack): such a need is *uncertain*, a warning that names ``audit --load``, never an
  error.
* ``optional``: the library that has the need is itself optional (loaded only when a feature is used, a
  plugin behind an extra): a missing need of it is a note naming how to get it, not an error.

:func:`severity` is the one rule, a pure function of those three facts; the audit's closure rules take
their default severities from it (:mod:`cudaship.checks.table`), ``doctor --env`` its ``unresolved`` ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from cudaship.records.findings import Severity


class Met(str, Enum):
    """How one need (an import) of a library is met; the order is the canonical one reports count in."""

    SHIPPED = "shipped"
    REQUIREMENT = "requirement"
    EXTRA = "extra"  #: by a requirement the wheel declares under an extra (``pkg[cu13]``)
    HOST = "host"  #: by a host package the wheel does not declare (torch)
    VARIANT = "variant"  #: the library is one variant of several, for another environment (a CUDA major)
    PRELOADED = "preloaded"  #: loaded first by a required package's import (torch's preloading)
    SYSTEM = "system"
    DRIVER = "driver"
    MISSING = "missing"


@dataclass(frozen=True)
class Judgement:
    """How one need is met, whether the static model is certain of it, and whether the library having the
    need is optional; :attr:`severity` is what that costs (None: it passes)."""

    met: Met
    certain: bool = True
    optional: bool = False

    @property
    def severity(self) -> Severity | None:
        return severity(self.met, certain=self.certain, optional=self.optional)


#: Needs met without a condition the user must act on: they pass.
_PASSES = frozenset({Met.SHIPPED, Met.REQUIREMENT, Met.PRELOADED, Met.SYSTEM, Met.DRIVER})
#: Needs met by what the user chooses (an extra) or by another environment (a variant): a note.
_CHOSEN = frozenset({Met.EXTRA, Met.VARIANT})


def severity(met: Met, *, certain: bool = True, optional: bool = False) -> Severity | None:
    """The one severity rule. In order:

    1. a need of an optional library (loaded only for a feature, a plugin behind an extra) that is not met
       by a certain mechanism is a note: the feature needs something the user chooses to install;
    2. an uncertain need (the package's own code decides at run time) is a warning naming ``--load``, never
       an error, whether the static model found a provider or not;
    3. a missing need is an error: the loader fails;
    4. a need met by an undeclared host package is a warning (users must install and import it first);
    5. a need met by an extra or by a variant for another environment is a note;
    6. anything else (shipped, a requirement, preloaded by a requirement, the system, the driver) passes.
    """
    if optional and (met is Met.MISSING or not certain or met in _CHOSEN or met is Met.HOST):
        return Severity.NOTE
    if not certain:
        return Severity.WARNING
    if met is Met.MISSING:
        return Severity.ERROR
    if met is Met.HOST:
        return Severity.WARNING
    if met in _CHOSEN:
        return Severity.NOTE
    assert met in _PASSES
    return None
