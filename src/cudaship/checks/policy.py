"""The audit policy: a documented TOML schema (docs/policy.md), validated with errors that name the key.

The policy is the ``[audit]`` table of the project's configuration (``--policy FILE``, else
``[tool.cudaship]``
of pyproject.toml, else cudaship.toml), beside the shared arch table ``[archs]``. Every check family has its
own
sub-table; a family without one runs only the parts that need no project knowledge. With no configuration at
all, :func:`cudaship.checks.table.default_policy` gives the built-in default. The policy is read by the
checks table (:func:`cudaship.checks.table.load_policy`): each family's section by the parser its row names.

Globs match paths inside the wheel as installed (``.data/platlib/`` stripped): ``*`` and ``?`` never cross a
``/``, ``**`` crosses any number of directories. Import patterns match library names case-insensitively.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cudaship.checks.globs import GlobError, compile_glob
from cudaship.errors import KnowledgeError
from cudaship.knowledge.arch_table import ArchTable, default_arch_table
from cudaship.knowledge.trains import parse_train
from cudaship.records.findings import SEVERITIES, Severity
from cudaship.schema import Table, type_name

#: Import names that count as "a CUDA library" for ``no_cuda`` unless a rule gives its own list.
DEFAULT_CUDA_PATTERNS: tuple[str, ...] = (
    "*cuda*",
    "cudart*",
    "cublas*",
    "libcublas*",
    "nvrtc*",
    "libnvrtc*",
    "cufft*",
    "libcufft*",
    "curand*",
    "libcurand*",
    "cusparse*",
    "libcusparse*",
    "cusolver*",
    "libcusolver*",
    "nvjitlink*",
    "libnvjitlink*",
    "cudnn*",
    "libcudnn*",
    "nccl*",
    "libnccl*",
    "nvcuda.dll",
    "libcuda.so*",
)


@dataclass(frozen=True)
class ShipsPolicy:
    required: tuple[str, ...] = ()  #: paths or globs that must match at least one shipped file
    import_libraries: tuple[tuple[str, str], ...] = ()  #: (import library path, DLL path) pairs
    pair_siblings: bool = True  #: X.lib beside X.dll pair up without being listed


@dataclass(frozen=True)
class ImportRule:
    """One ``[[audit.forbidden_imports]]`` or ``[[audit.required_imports]]`` entry."""

    key: str  #: where it came from, e.g. ``audit.forbidden_imports[1]``
    libraries: tuple[str, ...]
    patterns: tuple[str, ...] = ()
    no_cuda: bool = False
    cuda_patterns: tuple[str, ...] = DEFAULT_CUDA_PATTERNS
    dynamic_load: bool = True  #: required imports: a name stored for dlopen/LoadLibrary counts as reaching
    description: str | None = None


@dataclass(frozen=True)
class ArchsPolicy:
    libraries: tuple[str, ...] = ("**",)  #: which libraries with device code must carry the row's archs
    ptx: str = "newest"  #: "newest": the newest expected arch also as loadable PTX; "none": no PTX required
    relocatable_ptx: bool = True  #: flag PTX found only in relocatable fatbins (never loaded at run time)


@dataclass(frozen=True)
class RequirementsPolicy:
    #: os -> requirement templates ({major}, {next_major}, {cu}) that must equal the declared NVIDIA ones
    platforms: tuple[tuple[str, tuple[str, ...]], ...] = ()
    prefixes: tuple[str, ...] = ("nvidia-",)  #: which declared requirements count as NVIDIA ones


@dataclass(frozen=True)
class Component:
    name: str
    owner: str
    sentinels: tuple[str, ...]


@dataclass(frozen=True)
class ClosurePolicy:
    runtime_dirs: tuple[str, ...] = ()  #: PE: directories added to the DLL search path at run time
    allow: tuple[str, ...] = ()  #: import names allowed to stay unresolved (e.g. found on PATH)
    system_libraries: tuple[str, ...] = ()  #: extra names counted as system libraries
    unused_imports: bool = True
    exports: bool = True  #: symbols imported from a sibling library must be exported by it
    #: the extras the wheel is meant to be installed with: None (not set): a provider needed only under an
    #: extra passes with a note; a list: each extra must exist, and providers under other extras fail
    required_extras: tuple[str, ...] | None = None


@dataclass(frozen=True)
class CollisionsPolicy:
    soname_matches_filename: tuple[str, ...] = ()


@dataclass(frozen=True)
class SizePolicy:
    """``[audit.size]``: budgets in bytes (None: no budget)."""

    total: int | None = None  #: the wheel file (compressed)
    library: int | None = None  #: each native library, uncompressed
    arch: int | None = None  #: SASS of one arch, summed over the wheel's libraries


@dataclass(frozen=True)
class VariantGroup:
    """Libraries that are alternatives: one of them is loaded at run time (one per CUDA version, say).
    ``members``: (glob, train or None: from the name) pairs."""

    name: str
    members: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class VariantsPolicy:
    by_name: bool = True  #: recognise ``*_cuda118.so``, ``*_cu128.dll``... by their names
    groups: tuple[VariantGroup, ...] = ()


@dataclass(frozen=True)
class Policy:
    """A validated audit policy. ``configured`` names the families that had their own table."""

    source: str | None
    families: tuple[str, ...]
    configured: frozenset[str] = frozenset()
    #: the ``[archs]`` table, validated; None: the built-in table applies
    archs_table: ArchTable | None = None
    ships: ShipsPolicy = field(default_factory=ShipsPolicy)
    forbidden_imports: tuple[ImportRule, ...] = ()
    required_imports: tuple[ImportRule, ...] = ()
    archs: ArchsPolicy = field(default_factory=ArchsPolicy)
    requirements: RequirementsPolicy = field(default_factory=RequirementsPolicy)
    components: tuple[Component, ...] = ()
    closure: ClosurePolicy = field(default_factory=ClosurePolicy)
    collisions: CollisionsPolicy = field(default_factory=CollisionsPolicy)
    size: SizePolicy = field(default_factory=SizePolicy)
    #: ``[audit.severity]``: (``family`` or ``family.rule``, severity), as written
    severities: tuple[tuple[str, Severity], ...] = ()
    variants: VariantsPolicy = field(default_factory=VariantsPolicy)
    #: the checks table's severity of each family and ``family.rule`` (set by :mod:`cudaship.checks.table`,
    #: which reads the policy: this module sits below the table and the check modules)
    defaults: tuple[tuple[str, Severity], ...] = ()

    @property
    def is_default(self) -> bool:
        return not self.configured

    def runs(self, family: str) -> bool:
        return family in self.families

    def severity(self, family: str, rule: str | None) -> Severity:
        """The severity of a check: the policy's ``family.rule``, else its ``family``, else the checks table's
        default for the rule, else for the family (an unknown family: error)."""
        for given in (self.severities, self.defaults):
            found = dict(given)
            if rule is not None and f"{family}.{rule}" in found:
                return found[f"{family}.{rule}"]
            if family in found:
                return found[family]
        return Severity.ERROR

    def arch_table(self) -> ArchTable:
        """The policy's arch table, else the built-in one."""
        return self.archs_table if self.archs_table is not None else default_arch_table()


# --- validation
# -----------------------------------------------------------------------------------------------


def _compile(pattern: str, key: str, reader: Table, *, ignore_case: bool = False, flat: bool = False) -> None:
    """Compile ``pattern`` now, as the checks will match it (the compiled form is cached for them)."""
    try:
        compile_glob(pattern, ignore_case=ignore_case, flat=flat)
        if ignore_case:  # a library-name pattern is also matched by its last part (see name_match)
            compile_glob(pattern.rsplit("/", 1)[-1], ignore_case=True)
    except GlobError as e:
        raise reader.fail(key, f"{pattern[:80]!r}: {e}") from None


def _check_glob(reader: Table, pattern: str, key: str) -> None:
    """A path glob in the wheel (``[audit.ships] required``, ...), checked and compiled as the checks match
    it."""
    if pattern.startswith("/") or "\\" in pattern:
        raise reader.fail(key, f"{pattern[:80]!r}: use paths relative to the wheel root, with '/'")
    if "[" in pattern and "]" not in pattern:
        raise reader.fail(key, f"{pattern[:80]!r}: unclosed '['")
    _compile(pattern.strip(), key, reader)


def _check_pattern(reader: Table, pattern: str, key: str) -> None:
    """A library-name pattern (matched case-insensitively)."""
    _compile(pattern.strip(), key, reader, ignore_case=True)


def _check_symbol(reader: Table, pattern: str, key: str) -> None:
    """A symbol-name pattern (``*`` crosses ``/``)."""
    _compile(pattern.strip(), key, reader, flat=True)


Section = dict[str, Any]


def parse_ships(root: Table) -> Section | None:
    r = root.sub("ships")
    if r is None:
        return None
    pairs_raw = r.get("import_libraries") or {}
    if not isinstance(pairs_raw, dict):
        raise r.fail(
            r.dotted("import_libraries"), f"must be a table of LIB = DLL paths, not {type_name(pairs_raw)}"
        )
    pairs: list[tuple[str, str]] = []
    for lib, dll in pairs_raw.items():
        if not isinstance(dll, str) or not dll:
            raise r.fail(f"{r.dotted('import_libraries')}.{lib}", "must be the path of the DLL it imports")
        if not lib.lower().endswith(".lib"):
            raise r.fail(f"{r.dotted('import_libraries')}.{lib}", "the key must be a .lib path")
        pairs.append((lib, dll))
    ships = ShipsPolicy(
        required=r.strings("required", check=_check_glob),
        import_libraries=tuple(pairs),
        pair_siblings=r.boolean("pair_siblings", True),
    )
    r.unknown({"required", "import_libraries", "pair_siblings"})
    return {"ships": ships}


def parse_forbidden_imports(root: Table) -> Section | None:
    rules = _import_rules(root, "forbidden_imports", forbidden=True)
    return {"forbidden_imports": rules} if rules else None


def parse_required_imports(root: Table) -> Section | None:
    rules = _import_rules(root, "required_imports", forbidden=False)
    return {"required_imports": rules} if rules else None


def parse_archs(root: Table) -> Section | None:
    r = root.sub("archs")
    if r is None:
        return None
    archs = ArchsPolicy(
        libraries=r.strings("libraries", ("**",), check=_check_glob),
        ptx=r.string("ptx", "newest", ("newest", "none")) or "newest",
        relocatable_ptx=r.boolean("relocatable_ptx", True),
    )
    r.unknown({"libraries", "ptx", "relocatable_ptx"})
    return {"archs": archs}


def parse_requirements(root: Table) -> Section | None:
    r = root.sub("requirements")
    if r is None:
        return None
    platforms: list[tuple[str, tuple[str, ...]]] = []
    for os_name in ("linux", "windows", "macos"):
        if os_name in r.data:
            templates = r.strings(os_name)
            for i, t in enumerate(templates):
                _check_template(t, f"{r.dotted(os_name)}[{i}]", r)
            platforms.append((os_name, templates))
    requirements = RequirementsPolicy(tuple(platforms), r.strings("prefixes", ("nvidia-",)))
    r.unknown({"linux", "windows", "macos", "prefixes"})
    return {"requirements": requirements}


def parse_ownership(root: Table) -> Section | None:
    r = root.sub("ownership")
    if r is None:
        return None
    components: list[Component] = []
    comps = r.sub("components")
    if comps is None or not comps.data:
        raise r.fail(r.dotted("components"), "must be a table with one sub-table per component")
    for name, c in comps.tables():
        owner = c.text("owner", "the name the owning library's file starts with")
        sentinels = c.strings("sentinels", check=_check_symbol)
        if not sentinels:
            raise c.fail(c.dotted("sentinels"), "is required: at least one symbol")
        c.unknown({"owner", "sentinels"})
        components.append(Component(name, owner, sentinels))
    r.unknown({"components"})
    return {"components": tuple(components)}


def parse_closure(root: Table) -> Section | None:
    r = root.sub("closure")
    if r is None:
        return None
    closure = ClosurePolicy(
        runtime_dirs=tuple(d.strip("/") for d in r.strings("runtime_dirs", check=_check_glob)),
        allow=r.strings("allow", check=_check_pattern),
        system_libraries=r.strings("system_libraries", check=_check_pattern),
        unused_imports=r.boolean("unused_imports", True),
        exports=r.boolean("exports", True),
        required_extras=tuple(r.strings("required_extras")) if "required_extras" in r.data else None,
    )
    r.unknown({"runtime_dirs", "allow", "system_libraries", "unused_imports", "exports", "required_extras"})
    return {"closure": closure}


def parse_collisions(root: Table) -> Section | None:
    r = root.sub("collisions")
    if r is None:
        return None
    collisions = CollisionsPolicy(r.strings("soname_matches_filename", check=_check_glob))
    r.unknown({"soname_matches_filename"})
    return {"collisions": collisions}


_SIZE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30}


def _size(r: Table, name: str) -> int | None:
    value = r.get(name)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]i?)?b?\s*", value.lower())
        if match:
            size = int(float(match.group(1)) * _SIZE_UNITS[match.group(2) or ""])
            if size > 0:
                return size
    raise r.fail(r.dotted(name), f'must be a size (bytes, or "100M", "1.5G", "512Mi"), not {value!r}')


def parse_size(root: Table) -> Section | None:
    r = root.sub("size")
    if r is None:
        return None
    size = SizePolicy(_size(r, "total"), _size(r, "library"), _size(r, "arch"))
    r.unknown({"total", "library", "arch"})
    return {"size": size}


def parse_severity(root: Table, known: tuple[str, ...]) -> tuple[tuple[str, Severity], ...]:
    """``[audit.severity]``: ``family`` or ``"family.rule"`` = ``"error"`` | ``"warning"`` | ``"note"``; each
    key must be one of ``known`` (a family or rule of the checks table)."""
    r = root.sub("severity")
    if r is None:
        return ()
    out: list[tuple[str, Severity]] = []
    for key in r.data:
        if key not in known:
            raise r.fail(r.dotted(key), f"unknown check family or rule (known: {', '.join(known)})")
        value = r.string(key, choices=SEVERITIES)
        assert value is not None
        out.append((key, Severity(value)))
    return tuple(out)


def parse_variants(root: Table) -> VariantsPolicy:
    """``[audit.variants]``: ``by_name`` (recognise ``*_cuda118.so`` names, default true) and ``groups``, one
    table per group of alternatives: ``"glob" = "12.8"`` (its CUDA train; ``""``: from the name)."""
    r = root.sub("variants")
    if r is None:
        return VariantsPolicy()
    by_name = r.boolean("by_name", True)
    groups: list[VariantGroup] = []
    g = r.sub("groups")
    if g is not None:
        for name, members_reader in g.tables():
            if len(members_reader.data) < 2:
                raise g.fail(g.dotted(name), "a group of alternatives needs at least two libraries")
            members: list[tuple[str, str | None]] = []
            for glob in members_reader.data:
                key = members_reader.dotted(glob)
                _check_glob(members_reader, glob, key)
                train = members_reader.string(glob)
                if train:
                    try:
                        parse_train(train)
                    except KnowledgeError as e:
                        raise members_reader.fail(key, f"{train!r} is not a CUDA train (12.8, cu128)") from e
                members.append((glob, train or None))
            groups.append(VariantGroup(name, tuple(members)))
    r.unknown({"by_name", "groups"})
    return VariantsPolicy(by_name, tuple(groups))


def _family_list(root: Table, name: str, known: tuple[str, ...]) -> tuple[str, ...]:
    """``audit.checks`` / ``audit.skip``: names of check families, each one known."""
    families = root.strings(name)
    for i, fam in enumerate(families):
        if fam not in known:
            raise root.fail(
                f"{root.dotted(name)}[{i}]", f"unknown check family {fam!r} (known: {', '.join(known)})"
            )
    return families


def _import_rules(root: Table, name: str, *, forbidden: bool) -> tuple[ImportRule, ...]:
    rules: list[ImportRule] = []
    for r in root.rows(name, one=True):
        libraries = r.strings("libraries", check=_check_glob)
        if not libraries:
            raise r.fail(r.dotted("libraries"), "is required: globs of the libraries this rule applies to")
        patterns = r.strings("patterns", check=_check_pattern)
        no_cuda = r.boolean("no_cuda", False) if forbidden else False
        if not patterns and not no_cuda:
            what = "patterns (or no_cuda = true)" if forbidden else "patterns"
            raise r.fail(r.dotted("patterns"), f"is required: give {what}")
        rule = ImportRule(
            key=r.key,
            libraries=libraries,
            patterns=patterns,
            no_cuda=no_cuda,
            cuda_patterns=r.strings("cuda_patterns", DEFAULT_CUDA_PATTERNS, check=_check_pattern)
            if forbidden
            else (),
            dynamic_load=r.boolean("dynamic_load", True) if not forbidden else False,
            description=r.string("description"),
        )
        allowed = {"libraries", "patterns", "description"}
        allowed |= {"no_cuda", "cuda_patterns"} if forbidden else {"dynamic_load"}
        r.unknown(allowed)
        rules.append(rule)
    return tuple(rules)


_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
TEMPLATE_FIELDS = ("major", "next_major", "cu")


def _check_template(template: str, key: str, reader: Table) -> None:
    for m in _PLACEHOLDER.finditer(template):
        if m.group(1) not in TEMPLATE_FIELDS:
            raise reader.fail(
                key, f"{template!r}: unknown placeholder {{{m.group(1)}}} (known: major, next_major, cu)"
            )


def expand_template(template: str, major: int) -> str:
    """``nvidia-cuda-runtime{cu}>={major},<{next_major}`` for major 12 →
    ``nvidia-cuda-runtime-cu12>=12,<13``."""
    values = {"major": str(major), "next_major": str(major + 1), "cu": f"-cu{major}" if major <= 12 else ""}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


# --- globs
# ----------------------------------------------------------------------------------------------------


def glob_match(pattern: str, path: str, *, ignore_case: bool = False) -> bool:
    """Whether ``path`` matches ``pattern`` (``**`` crosses directories; ``*`` does not), in time linear in
    ``path`` (:mod:`cudaship.checks.globs`; the policy's patterns were compiled when it was loaded)."""
    return compile_glob(pattern, ignore_case=ignore_case).match(path)


def any_match(patterns: Iterable[str], path: str, *, ignore_case: bool = False) -> str | None:
    for pattern in patterns:
        if glob_match(pattern, path, ignore_case=ignore_case):
            return pattern
    return None


def name_match(patterns: Iterable[str], name: str) -> str | None:
    """Match a library name (no directories) case-insensitively; a pattern with ``/`` matches the base
    name."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    for pattern in patterns:
        if glob_match(pattern.rsplit("/", 1)[-1], base, ignore_case=True):
            return pattern
    return None
