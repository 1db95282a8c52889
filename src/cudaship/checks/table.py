"""The checks table: every check family of the audit in one place.

Each row names the family, says in one line what it checks, gives its run function, its default severity,
whether the built-in default policy runs it, the parser of its ``[audit.<family>]`` policy section, and the
rules inside it that the policy can give their own severity (``[audit.severity] "closure.unused_imports" =
"error"``). The engine runs the families in this order; the policy parser, the JSON schema's ``family`` enum,
the ``[audit.severity]`` keys and docs/policy.md's list of families all come from here (tests/checks/
test_table.py ties them together).

The policy is read here (:func:`load_policy`, :func:`parse_audit_table`, :func:`default_policy`), each
section by its row's parser: this table sits above :mod:`cudaship.checks.policy` and the check modules, which
import the policy and never the table (so no import circle runs through them).

A result names its rule itself (``CheckResult.rule``) or, for families that do not, the rule whose ``prefix``
starts the check's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cudaship.checks import (
    archs,
    closure,
    collisions,
    consistency,
    imports,
    ownership,
    policy,
    record,
    requirements,
    ships,
    size,
    variant_props,
)
from cudaship.checks.context import AuditContext
from cudaship.checks.policy import Policy
from cudaship.config import ProjectConfig
from cudaship.errors import PolicyError
from cudaship.knowledge.arch_table import ArchTable
from cudaship.records import judgement
from cudaship.records.findings import CheckResult, Severity
from cudaship.records.judgement import Met
from cudaship.schema import Table

CheckFn = Callable[[AuditContext], list[CheckResult]]
SectionParser = Callable[[Table], "policy.Section | None"]

ERROR, WARNING, NOTE = Severity.ERROR, Severity.WARNING, Severity.NOTE


def _judged(met: Met, *, certain: bool = True, optional: bool = False) -> Severity:
    """A closure rule's default severity, from the one judgement's rule (docs/design.md, "One judgement"):
    the rule's mechanism as a :class:`Met`, and whether the static model is certain of it."""
    found = judgement.severity(met, certain=certain, optional=optional)
    assert found is not None, f"{met} passes: no rule needed"
    return found


def _load_run(ctx: AuditContext) -> list[CheckResult]:
    """The ``load`` family's engine entry, imported only when called: the comparison (and the oracle's
    records it reads) is needed only by ``audit --load``, so a static audit does not import it."""
    from cudaship.checks import load

    return load.run(ctx)


@dataclass(frozen=True)
class Rule:
    """A kind of check inside a family whose severity the policy can set on its own."""

    name: str
    severity: Severity
    what: str
    prefix: str | None = None  #: a check name starting with this is of this rule (when it names none)


@dataclass(frozen=True)
class Family:
    name: str
    what: str  #: one line, for docs and ``--help``
    run: CheckFn
    severity: Severity = ERROR  #: default severity of its results (rules may differ)
    default: bool = False  #: the built-in default policy runs it (it needs no project knowledge)
    section: SectionParser | None = None  #: parser of ``[audit.<name>]``; None: the family takes no options
    rules: tuple[Rule, ...] = ()


FAMILIES: tuple[Family, ...] = (
    Family(
        "record",
        "every file matches RECORD (hash and size), none missing or unlisted; every native file readable",
        record.run,
        default=True,
    ),
    Family(
        "ships",
        "required files are in the wheel; import libraries pair with their DLLs",
        ships.run,
        section=policy.parse_ships,
    ),
    Family(
        "forbidden_imports",
        "libraries do not import what a rule forbids (e.g. no CUDA library in the Python module)",
        imports.run_forbidden,
        section=policy.parse_forbidden_imports,
    ),
    Family(
        "required_imports",
        "libraries import (or load by name) what a rule requires",
        imports.run_required,
        section=policy.parse_required_imports,
    ),
    Family(
        "archs",
        "device code: GPU coverage of the CUDA train (default) or the expected SASS per library (an [archs] "
        "table), PTX loaded at run time, forward-compatible PTX",
        archs.run,
        default=True,
        section=policy.parse_archs,
        rules=(
            Rule(
                "relocatable_ptx",
                WARNING,
                "a library's PTX is only in relocatable fatbins (linked, never loaded at run time)",
                "archs: loadable PTX in ",
            ),
            Rule(
                "forward_ptx",
                WARNING,
                "SASS, no loadable generic PTX: a GPU none of its SASS runs on (a newer one) cannot run it",
                "archs: forward-compatible PTX in ",
            ),
            Rule(
                "coverage",
                WARNING,
                "without an [archs] table: a library with device code does not run (natively or by PTX JIT) "
                "on every GPU its CUDA train supports on the wheel's machine (skipped, saying why, with no "
                "train)",
                "archs: GPU coverage",
            ),
            Rule(
                "expected", ERROR, "the expected arch list for the wheel's train", "archs: expected arch list"
            ),
            Rule("sass", ERROR, "a library carries exactly the expected archs", "archs: "),
        ),
    ),
    Family(
        "requirements",
        "declared requirements match the policy's per platform and provide the CUDA libraries imported",
        requirements.run,
        default=True,
        section=policy.parse_requirements,
        rules=(
            Rule(
                "variant",
                NOTE,
                "CUDA imports not provided only for variants whose siblings are (another environment's)",
            ),
            Rule(
                "closure",
                NOTE,
                "CUDA imports that resolve nowhere: the closure check's error reports the same import (one "
                "cause, one error)",
            ),
        ),
    ),
    Family(
        "ownership",
        "each component's sentinel symbols are defined by its owning library only",
        ownership.run,
        section=policy.parse_ownership,
    ),
    Family(
        "closure",
        "every library's imports resolve as the loader would resolve them; no needed library goes unused",
        closure.run,
        default=True,
        section=policy.parse_closure,
        rules=(
            Rule(
                "variant",
                _judged(Met.VARIANT),
                "a variant's imports do not resolve but a sibling's do: it is for another environment",
            ),
            Rule(
                "optional",
                _judged(Met.MISSING, optional=True),
                "an optional library (loaded only by name at run time, or off the import path with what it "
                "needs behind an extra) whose imports do not resolve: the feature needs them, the message "
                "names the extra",
            ),
            Rule(
                "unused_imports",
                WARNING,
                "a DT_NEEDED / imported DLL none of whose symbols is used",
                "closure: unused imports in ",
            ),
            Rule(
                "package_preload",
                _judged(Met.PRELOADED, certain=False),
                "an import found only because the package's own Python code loads it first (ctypes.CDLL, "
                "a load_library() helper, torch.ops.load_library, os.add_dll_directory): uncertain, "
                "`audit --load` decides",
                "closure: preloaded by the package's Python code in ",
            ),
            Rule(
                "undeclared_host",
                _judged(Met.HOST),
                "a library of a host package the wheel does not declare (torch): users install and import "
                "it first",
                "closure: undeclared host package ",
            ),
            Rule(
                "loaded_first",
                _judged(Met.SHIPPED, certain=False),
                "a library no shipped library loads (a Python module) needs one shipped off its search "
                "path (by SONAME, or a Mach-O install name): it loads only when that one is already "
                "loaded; uncertain, `audit --load` decides",
                "closure: needs a sibling loaded first: ",
            ),
            Rule(
                "distribution_library",
                _judged(Met.SYSTEM, certain=False),
                "an import outside the manylinux policy off the import path (a helper executable), or "
                "under a tag naming no policy (linux_x86_64) when the distributions install it by default: "
                "the message names the system package",
                "closure: needs the system library ",
            ),
            Rule(
                "computed_path",
                _judged(Met.REQUIREMENT, certain=False),
                "uncertain: imports off the search path while the package's code builds library paths at "
                "run time (importlib.metadata into an environment variable, os.add_dll_directory on a "
                "directory it computes); `audit --load` decides",
                "closure: library paths computed at run time by ",
            ),
            Rule(
                "vendored_nvidia",
                WARNING,
                "a shipped copy of a library an NVIDIA wheel provides (the bytes depending on it saves); "
                "`cudaship repair` removes it",
                "closure: vendored copy of ",
            ),
            Rule(
                "dependency",
                NOTE,
                "a library whose imports resolve needs a shipped library that does not load: it fails with "
                "it (the error is that library's)",
            ),
            Rule(
                "build_path",
                WARNING,
                "an RPATH / RUNPATH entry not relative to the library ($ORIGIN): an absolute build path the "
                "user's machine may have",
                "closure: search path entry ",
            ),
        ),
    ),
    Family(
        "collisions",
        "no paths differing only by case; distinct import library names; SONAMEs match file names",
        collisions.run,
        default=True,
        section=policy.parse_collisions,
        rules=(
            Rule(
                "import_library_names",
                WARNING,
                "two import libraries (.lib) share a file name in different directories (one per CUDA "
                "major): they overwrite each other only when copied into one build tree, and nothing loads "
                "them at run time",
                "collisions: import library names",
            ),
        ),
    ),
    Family(
        "consistency",
        "the CUDA train named by the tag, cudart imports, PTX ISA and cubin toolkits agree",
        consistency.run,
        default=True,
        rules=(
            Rule(
                "older_code",
                WARNING,
                "all device code is older than the train the tag names: it runs, but was not built with it",
                "consistency: device code older than ",
            ),
            Rule(
                "cuda_claim",
                ERROR,
                "a wheel whose name (-cu12, -cuda12x) or local version (+cu128) claims CUDA has CUDA code",
                "consistency: CUDA claim",
            ),
        ),
    ),
    Family(
        "variant",
        "a variant wheel's nvidia properties (variant.json) agree with the binaries: sm_arch values with "
        "their "
        "SASS / PTX, the CUDA version bounds with what the runtime and device code need from the driver",
        variant_props.run,
        default=True,
        rules=(
            Rule(
                "value",
                ERROR,
                "a declared nvidia property the NVIDIA provider never reports (12.8.1, 86_virtual): the "
                "variant "
                "matches no machine",
            ),
            Rule(
                "sm_arch",
                ERROR,
                "an sm_arch value without SASS (real) or PTX (virtual) for its capability in every library "
                "with "
                "device code, or offered to a GPU the code does not run on",
                "variant: nvidia :: sm_arch ",
            ),
            Rule(
                "lower_bound",
                ERROR,
                "cuda_version_lower_bound below what the runtime, cubins, PTX JIT or compression need",
                "variant: nvidia :: cuda_version_lower_bound ",
            ),
            Rule(
                "upper_bound",
                ERROR,
                "cuda_version_upper_bound that admits only drivers too old for the CUDA runtime linked",
                "variant: nvidia :: cuda_version_upper_bound ",
            ),
            Rule(
                "release",
                ERROR,
                "`variant release`: the release's metadata disagree, a machine gets a variant that cannot "
                "run "
                "there, or a machine inside the covered range gets none",
            ),
            Rule(
                "null",
                WARNING,
                "`variant release`: no null variant, or one that carries CUDA code",
            ),
            Rule(
                "unadmitted",
                NOTE,
                "device code no GPU the variant is offered to uses, with its size",
                variant_props.UNADMITTED,
            ),
        ),
    ),
    Family(
        "size",
        "what the wheel weighs per library (SASS per arch, PTX, host code), the CUDA libraries an NVIDIA "
        "wheel provides, PyPI's file-size limit, the policy's budgets (total, per library, per arch)",
        size.run,
        section=policy.parse_size,
        rules=(
            Rule("vendored", NOTE, "a shipped CUDA library that an NVIDIA wheel provides (cudaship repair)"),
            Rule("pypi_limit", NOTE, "the wheel is over PyPI's default file-size limit (100 MiB)"),
            Rule("budget", ERROR, "over a budget of [audit.size]: total, library or arch"),
        ),
    ),
    Family(
        "load",
        "only with `audit --load`: the wheel installed with pip loads in fresh processes, and the real "
        "loader maps each DT_NEEDED as the static verdicts say (docs/load.md)",
        _load_run,
        rules=(
            Rule("failure", ERROR, "a top-level package's import or a library's dlopen fails once installed"),
            Rule("install", ERROR, "pip cannot install the wheel as documented (nothing could be loaded)"),
            Rule(
                "toolkit",
                ERROR,
                "a library loads only through a local CUDA toolkit (a dependency found outside the "
                "environment): without one it does not load",
            ),
            Rule(
                "disagreement",
                WARNING,
                "the loader loads what the static audit says does not resolve, or another file than it names",
            ),
            Rule("preloaded", NOTE, "a library loads only after its package is imported (it preloads)"),
            Rule("on_demand", NOTE, "a library a documented convention loads on demand does not load"),
            Rule("variant", NOTE, "a variant library does not load, a sibling does: another environment's"),
            Rule("extra", NOTE, "a library needs what an extra installs, and that extra was not installed"),
            Rule("runtime", NOTE, "a library needs what the package finds at run time (not run by loading)"),
            Rule("auxiliary", NOTE, "a private, non-package or test/sample top-level module does not import"),
            Rule("no_driver", NOTE, "not judged: needs libcuda.so.1 and there is no driver and no stub here"),
            Rule("not_probed", NOTE, "native files not loaded: executables, extensions for another Python"),
            Rule("copy", NOTE, "copies of a library shipped under several names, loaded once by its SONAME"),
        ),
    ),
)

_BY_NAME = {f.name: f for f in FAMILIES}


def family_names() -> tuple[str, ...]:
    return tuple(f.name for f in FAMILIES)


def default_families() -> tuple[str, ...]:
    return tuple(f.name for f in FAMILIES if f.default)


def severity_keys() -> tuple[str, ...]:
    """Every key ``[audit.severity]`` accepts: each family, and ``family.rule`` for each rule."""
    keys: list[str] = []
    for f in FAMILIES:
        keys.append(f.name)
        keys.extend(f"{f.name}.{r.name}" for r in f.rules)
    return tuple(keys)


def rule_of(result: CheckResult) -> str | None:
    """The rule a result belongs to: its own, else the first of its family whose prefix starts its name."""
    if result.rule is not None:
        return result.rule
    family = _BY_NAME.get(result.family)
    if family is None:
        return None
    for rule in family.rules:
        if rule.prefix is not None and result.name.startswith(rule.prefix):
            return rule.name
    return None


def default_severity(family: str, rule: str | None) -> Severity:
    """The table's severity for ``family`` (and ``rule`` in it); an unknown family is an error."""
    row = _BY_NAME.get(family)
    if row is None:
        return ERROR
    for r in row.rules:
        if r.name == rule:
            return r.severity
    return row.severity


# --- the policy, read by this table ------------------------------------------------------------------------


def _defaults() -> tuple[tuple[str, Severity], ...]:
    """The table's severity of every family and ``family.rule`` (what a policy gives no severity falls to)."""
    found: list[tuple[str, Severity]] = []
    for f in FAMILIES:
        found.append((f.name, f.severity))
        found.extend((f"{f.name}.{r.name}", r.severity) for r in f.rules)
    return tuple(found)


def default_policy() -> Policy:
    """The built-in default: every check that needs no project knowledge."""
    return Policy(source=None, families=default_families(), defaults=_defaults())


def load_policy(config: ProjectConfig) -> Policy:
    """Validate the configuration's ``[audit]`` table; no table and no file gives :func:`default_policy`."""
    source = str(config.source) if config.source else None
    archs_table = config.table("archs")
    table = ArchTable.from_mapping(archs_table, source or "configuration") if archs_table else None
    if config.data.get("audit") is None:
        base = default_policy()
        return Policy(source=source, families=base.families, archs_table=table, defaults=base.defaults)
    return parse_audit_table(config.table("audit"), source, table)


def parse_audit_table(
    audit: Mapping[str, Any], source: str | None, archs_table: ArchTable | None = None
) -> Policy:
    """Validate ``[audit]``: each check family's section is read by the parser its row names;
    ``severity`` and ``variants`` by :mod:`cudaship.checks.policy`."""
    root = Table(audit, "audit", source, PolicyError)
    configured: set[str] = set()
    fields: dict[str, Any] = {}
    for family in FAMILIES:
        if family.section is None:
            r = root.sub(family.name)
            if r is not None:
                r.unknown(())
            continue
        parsed = family.section(root)
        if parsed is not None:
            configured.add(family.name)
            fields.update(parsed)

    severities = policy.parse_severity(root, severity_keys())
    variants = policy.parse_variants(root)
    names = family_names()
    families = policy._family_list(root, "checks", names)
    skip = policy._family_list(root, "skip", names)
    if not families:
        families = tuple(f for f in names if f in default_families() or f in configured)
    families = tuple(f for f in names if f in families and f not in skip)
    root.unknown({"checks", "skip", "severity", "variants", *names})
    return Policy(
        source=source,
        families=families,
        configured=frozenset(configured),
        archs_table=archs_table,
        severities=severities,
        variants=variants,
        defaults=_defaults(),
        **fields,
    )


# --- docs --------------------------------------------------------------------------------------------------

#: Where docs/policy.md holds :func:`markdown` (tests/checks/test_table.py keeps them equal).
DOC_START = "<!-- checks table: generated by `python -m cudaship.checks.table`; do not edit by hand -->"
DOC_END = "<!-- end of checks table -->"

_DEFAULT_PART = {
    "archs": "GPU coverage of the train, relocatable and forward-compatible PTX",
    "requirements": "provided imports only",
}


def _table_cell(f: Family) -> str:
    if f.section is None:
        return "—"
    if f.name in ("forbidden_imports", "required_imports"):
        return f"`[[audit.{f.name}]]`"
    if f.name == "ownership":
        return "`[audit.ownership.components.*]`"
    if f.name == "archs":
        return "`[audit.archs]` + `[archs]`"
    return f"`[audit.{f.name}]`"


def markdown() -> str:
    """The families and rules as docs/policy.md shows them."""
    lines = [
        DOC_START,
        "",
        "| family | runs by default | table | severity | what |",
        "|---|---|---|---|---|",
    ]
    for f in FAMILIES:
        default = _DEFAULT_PART.get(f.name, "yes") if f.default else "no"
        lines.append(f"| `{f.name}` | {default} | {_table_cell(f)} | {f.severity.value} | {f.what} |")
    lines += ["", "Rules with a severity of their own (`[audit.severity]` keys `family.rule`):", ""]
    lines += ["| key | default severity | what |", "|---|---|---|"]
    for f in FAMILIES:
        for r in f.rules:
            lines.append(f"| `{f.name}.{r.name}` | {r.severity.value} | {r.what} |")
    lines += ["", DOC_END]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - a maintainer's tool
    print(markdown())
