"""The installed closure of a wheel's requirements, as ``pip install`` would lay it out, for the wheel's own
target platform.

Requires-Dist markers are evaluated for the target (OS, machine, Python of the wheel's tags). A requirement
whose marker needs one of the wheel's extras is followed too, remembering the extra: what it installs is
"provided when installed as name[extra]". Extras of a requirement (``cuda-toolkit[cublas]``) select that
distribution's extra-only requirements. Each project gets one version: the first requirement that reaches it
decides (the audited wheel's own requirements come first, breadth first). Work is bounded: at most
:data:`MAX_DISTRIBUTIONS` distributions, :data:`MAX_DEPTH` levels.

Sources are asked in order; the first that has a fitting distribution wins. The index is read from
:data:`WORKERS` threads per level. A source that cannot answer (index unreachable) is skipped for the rest of
the run with a note, and the knowledge table answers instead; offline, a project the cache has no answer for
is answered by the knowledge table, and the cache still answers for the others. The result never depends on
the order the threads run in: a source found dead is skipped only by the lookups after the batch that found
it (see :meth:`_Resolver.lookup_all`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from cudaship import words
from cudaship.errors import CudashipError
from cudaship.providers.constraints import Constraints
from cudaship.providers.http import IndexUnavailable, NotCached
from cudaship.providers.records import Closure, Distribution, Reached, Target, Unresolved
from cudaship.providers.sources import Source
from cudaship.wheel.metadata import marker_environment

MAX_DISTRIBUTIONS = 400
MAX_DEPTH = 8
WORKERS = 8

_EXTRA_IN_MARKER = re.compile(r"""\bextra\s*==\s*['"]([^'"]+)['"]""")


def _holds(marker: Marker | None, env: dict[str, str], extra: str) -> bool:
    if marker is None:
        return True
    try:
        return bool(marker.evaluate({**env, "extra": extra}))
    except Exception:  # an unevaluable marker does not apply (pip warns and skips it)
        return False


#: Evaluations of markers that compare ``extra`` otherwise than with ``==``/``!=`` (``"a" in extra``), which
#: are evaluated once per extra asked for, per distribution; past it such requirements are left out, with a
#: note. Every other marker is evaluated a number of times bounded by its own length.
MAX_PER_EXTRA_EVALUATIONS = 20_000


def _extra_literals(marker: Marker) -> frozenset[str] | None:
    """The strings ``marker`` compares ``extra`` with, if it compares it only with ``==`` and ``!=``
    (then its value is the same for every extra outside them); None otherwise, or for a tree this version of
    packaging lays out differently."""
    found: set[str] = set()

    def walk(node: object) -> bool:
        if isinstance(node, str):  # "and" / "or"
            return True
        if isinstance(node, list):
            return all(walk(n) for n in node)
        if not isinstance(node, tuple) or len(node) != 3:
            return False
        lhs, op, rhs = node
        sides = [(lhs, rhs), (rhs, lhs)] if type(lhs).__name__ != "Variable" else [(lhs, rhs)]
        for var, value in sides:
            if type(var).__name__ == "Variable" and getattr(var, "value", None) == "extra":
                if getattr(op, "value", None) not in ("==", "!="):
                    return False
                literal = getattr(value, "value", None)
                if not isinstance(literal, str):
                    return False
                found.add(literal)
                return True
        return True

    markers = getattr(marker, "_markers", None)
    return frozenset(found) if isinstance(markers, list) and walk(markers) else None


class RequirementIndex:
    """A distribution's Requires-Dist for one marker environment: each entry parsed once, its marker
    evaluated once with no extra and once per extra it names, and indexed by the extras it holds for.

    :meth:`select` then costs the requirements it returns, not (requirements x extras asked for): a hostile
    METADATA with 9,999 requirements each behind its own extra, or a requirement asking for hundreds of
    extras, is linear work. :attr:`evaluations` counts the marker evaluations (tests bound it)."""

    def __init__(self, requires_dist: Sequence[str], env: dict[str, str]) -> None:
        self.env = env
        self.evaluations = 0
        self.notes: list[str] = []
        self._entries: list[tuple[Requirement, str]] = []
        self._always: list[int] = []  #: positions whose marker holds with no extra
        self._by_extra: dict[str, list[int]] = {}  #: canonical extra -> positions it makes hold
        #: positions whose marker holds for every extra it does not name, and the named ones it fails for
        self._unless: list[tuple[int, frozenset[str]]] = []
        self._per_extra: list[int] = []  #: positions whose marker is evaluated once per extra asked for
        self._per_extra_done = 0
        for text in requires_dist:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            self._entries.append((req, text))
            self._place(len(self._entries) - 1, req.marker)

    def _eval(self, marker: Marker, extra: str) -> bool:
        self.evaluations += 1
        return _holds(marker, self.env, extra)

    def _place(self, pos: int, marker: Marker | None) -> None:
        if marker is None or self._eval(marker, ""):
            self._always.append(pos)
            return
        literals = _extra_literals(marker)
        if literals is None:
            self._per_extra.append(pos)
            return
        named = {canonicalize_name(x) for x in literals} - {""}
        if "" in literals or any(not canonicalize_name(x) for x in literals):
            # "" is named: the value for the other extras is that of a string no literal equals
            outside = self._eval(marker, "x" * (1 + max(len(x) for x in literals)))
        else:
            outside = False  # the same as with no extra
        holds = {e for e in sorted(named) if self._eval(marker, e)}
        if outside:
            self._unless.append((pos, frozenset(named - holds)))
            return
        for extra in holds:
            self._by_extra.setdefault(extra, []).append(pos)

    def select(self, extras: Sequence[str]) -> list[tuple[Requirement, str | None, str]]:
        """(requirement, extra it needs or None, text) for each entry that applies with no extra, or with
        one of ``extras`` (the first that makes the marker hold), in the order of Requires-Dist."""
        wanted: dict[str, str] = {}  # canonical -> as asked; the first asking wins
        for extra in extras:
            if extra:
                wanted.setdefault(canonicalize_name(extra), extra)
        chosen: dict[int, str | None] = dict.fromkeys(self._always)
        for key, extra in wanted.items():  # in the order asked: the first extra that holds is kept
            for pos in self._by_extra.get(key, ()):
                chosen.setdefault(pos, extra)
        for pos, fails in self._unless:  # at most len(fails) + 1 steps each
            first = next((e for k, e in wanted.items() if k not in fails), None)
            if first is not None:
                chosen[pos] = first
        spent = False
        for pos in self._per_extra:
            marker = self._entries[pos][0].marker
            for extra in wanted.values():
                if self._per_extra_done >= MAX_PER_EXTRA_EVALUATIONS:
                    spent = True
                    break
                self._per_extra_done += 1
                if marker is not None and self._eval(marker, extra):
                    chosen[pos] = extra
                    break
            if spent:
                note = (
                    f"{words.count(len(self._per_extra), 'requirement')} compare 'extra' otherwise than with "
                    "== or !=; "
                    f"their markers were evaluated {MAX_PER_EXTRA_EVALUATIONS} times, the rest left out"
                )
                if note not in self.notes:
                    self.notes.append(note)
                break
        return [(self._entries[p][0], chosen[p], self._entries[p][1]) for p in sorted(chosen)]


@dataclass
class _Job:
    req: Requirement
    chain: tuple[str, ...]
    extra: str | None
    depth: int


@dataclass(frozen=True)
class _Answer:
    """One lookup's outcome, and what it learnt about the sources (applied by the caller, in job order)."""

    dist: Distribution | None
    why: str | None  #: why nothing was found
    failed: tuple[tuple[int, str], ...] = ()  #: sources that could not answer at all: (index, message)
    missed: tuple[int, ...] = ()  #: sources with no answer for this one project (offline: not in the cache)
    answered: tuple[int, ...] = ()  #: sources that answered (a distribution, or none that fits)
    #: a source's file for this project that could not be read (``wheelhouse DIR: x.whl: ...``): a note each
    unreadable: tuple[str, ...] = ()


@dataclass
class _Resolver:
    """The sources and the run's state. A lookup reads only the set of dead sources it is handed and returns
    what it learnt, so that lookups running side by side do not depend on which of them ran first."""

    sources: Sequence[Source]
    fallback: Source | None
    target: Target
    env: dict[str, str] = field(default_factory=dict)
    reached: dict[str, Reached] = field(default_factory=dict)
    extras_done: dict[str, set[str]] = field(default_factory=dict)
    unresolved: list[Unresolved] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    dead: set[int] = field(default_factory=set)  #: sources that could not answer: not asked again
    proven: set[int] = field(default_factory=set)  #: sources that have answered once in this run
    missed: dict[int, set[str]] = field(default_factory=dict)  #: source -> projects it had no answer for
    #: project -> its distribution's Requires-Dist, parsed and indexed once however many extras are followed
    indexes: dict[str, RequirementIndex] = field(default_factory=dict)

    def requirements(
        self, name: str, dist: Distribution, extras: Sequence[str]
    ) -> list[tuple[Requirement, str | None, str]]:
        index = self.indexes.get(name)
        if index is None:
            index = self.indexes[name] = RequirementIndex(dist.requires_dist, self.env)
        out = index.select(extras)
        self.notes.extend(f"{name}: {n}" for n in index.notes if f"{name}: {n}" not in self.notes)
        return out

    #: project -> what the constraints allow on this target (``--constraint``, ``--replay``)
    pins: dict[str, SpecifierSet] = field(default_factory=dict)

    def lookup(self, name: str, spec: SpecifierSet, dead: frozenset[int]) -> _Answer:
        """The first fitting distribution from the sources not in ``dead`` (the fallback answers when one of
        them is dead or could not answer), or none and why not."""
        problems: list[str] = []
        failed: list[tuple[int, str]] = []
        missed: list[int] = []
        answered: list[int] = []
        unreadable: list[str] = []
        found: Distribution | None = None
        pinned = self.pins.get(canonicalize_name(name))
        if pinned is not None:
            spec = spec & pinned
        for i, source in enumerate(self.sources):
            if i in dead:
                continue
            try:
                found = source.find(name, spec, self.target)
            except NotCached as e:
                missed.append(i)
                problems.append(e.message)
                continue
            except IndexUnavailable as e:
                failed.append((i, e.message))
                problems.append(e.message)
                continue
            except (
                CudashipError
            ) as e:  # that project's file at this source is unreadable; the next source is asked
                answered.append(i)
                problems.append(e.message)
                text = str(e)
                unreadable.append(text if text.startswith(source.label) else f"{source.label}: {text}")
                continue
            answered.append(i)
            if found is not None:
                break
        if found is None and self.fallback is not None and (dead or failed or missed or not self.sources):
            found = self.fallback.find(name, spec, self.target)
        why = None
        if found is None:
            labels = ", ".join(s.label for s in self.sources) or "no source"
            why = f"no distribution of {name}{spec} for {self.target.os} in {labels}" + (
                f" ({problems[0]})" if problems else ""
            )
            if pinned is not None:
                why += f" (constrained to {pinned})"
        return _Answer(found, why, tuple(failed), tuple(missed), tuple(answered), tuple(unreadable))

    def lookup_all(self, pool: ThreadPoolExecutor, jobs: Sequence[_Job]) -> list[_Answer]:
        """Look ``jobs`` up in parallel, with the same dead sources for each, whatever the order they run in.

        A source that cannot answer is dead for the lookups after this call, never for those running beside
        the one that found it so (which of them ran first depends on the threads). While a source has not
        answered yet in this run, the first job is looked up alone first: an index that cannot be reached
        then costs one time-out, not one per worker."""
        if not jobs:
            return []
        answers: list[_Answer] = []
        if set(range(len(self.sources))) - self.dead - self.proven:
            answers.append(self.lookup(jobs[0].req.name, jobs[0].req.specifier, frozenset(self.dead)))
            self._learn(answers[-1:], [jobs[0]])
            jobs = jobs[1:]
        dead = frozenset(self.dead)
        rest = list(pool.map(lambda j: self.lookup(j.req.name, j.req.specifier, dead), jobs))
        self._learn(rest, jobs)
        return answers + rest

    def _learn(self, answers: Sequence[_Answer], jobs: Sequence[_Job]) -> None:
        for answer, job in zip(answers, jobs, strict=True):
            self.proven.update(answer.answered, answer.missed)
            for i in answer.missed:
                self.missed.setdefault(i, set()).add(canonicalize_name(job.req.name))
            for line in answer.unreadable:
                if line not in self.unreadable:
                    self.unreadable.append(line)
            for i, message in answer.failed:
                if i not in self.dead:
                    self.dead.add(i)
                    self.notes.append(f"{self.sources[i].label} cannot answer ({message}); not asked again")

    def missed_notes(self) -> list[str]:
        out = []
        for i, names in sorted(self.missed.items()):
            shown = sorted(names)
            listed = ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
            out.append(
                f"{self.sources[i].label}: no answer for {len(shown)} "
                f"{'project' if len(shown) == 1 else 'projects'} ({listed})"
                + ("; the knowledge table answered where it could" if self.fallback is not None else "")
            )
        return out


def _short(req: Requirement) -> str:
    """A requirement as written without its marker: ``cuda-toolkit[cublas]==13.0.3``."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}" + (f" @ {req.url}" if req.url else "")


def _from(reached: Reached, kind: str) -> bool:
    return reached.dist.source.startswith(kind)


def requirements_of(
    requires_dist: Sequence[str], env: dict[str, str], extras: Sequence[str]
) -> list[tuple[Requirement, str | None, str]]:
    """(requirement, extra it needs or None, text) for each entry that applies to ``env`` with no extra, or
    with one of ``extras`` (the first that makes the marker hold); see :class:`RequirementIndex`."""
    return RequirementIndex(requires_dist, env).select(extras)


def wheel_extras(requires_dist: Sequence[str], provides_extra: Sequence[str] = ()) -> list[str]:
    """The extras a distribution offers: Provides-Extra, plus those its markers name."""
    names = [canonicalize_name(e) for e in provides_extra]
    for text in requires_dist:
        names.extend(canonicalize_name(m) for m in _EXTRA_IN_MARKER.findall(text))
    return list(dict.fromkeys(names))


def _conflicting_extras(roots: Sequence[_Job], reached: dict[str, Reached]) -> list[str]:
    """The wheel's extras with a requirement of their own that excludes the version the closure took for its
    project (another extra's, or the unconditional one's), in the order of Requires-Dist."""
    out: list[str] = []
    for job in roots:
        if job.extra is None or job.extra in out or not job.req.specifier:
            continue
        took = reached.get(canonicalize_name(job.req.name))
        if took is not None and not job.req.specifier.contains(took.dist.version, prereleases=True):
            out.append(job.extra)
    return out


def resolve_closure(
    requires_dist: Sequence[str],
    target: Target,
    sources: Sequence[Source],
    *,
    extras: Sequence[str] | None = None,
    fallback: Source | None = None,
    own_name: str | None = None,
    constraints: Constraints | None = None,
    split: bool = True,
) -> Closure:
    """The distributions the wheel's requirements install on ``target``, breadth first; ``extras``: the
    wheel's extras whose requirements are followed too (None: every extra its markers name).

    Extras that pip never installs together (one per CUDA major: ``pkg[cu12]`` asks for
    ``cuda-toolkit[nvrtc]==12.*``, ``pkg[cu13]`` for ``==13.*``) would get one version of the project they
    share, the first's. With ``split``, an extra whose own requirement excludes the version the closure took
    is resolved on its own and what it installs is added, under that extra (issue 32, class 1): each
    major's libraries are credited to its own extra."""
    env = marker_environment(target.os, target.machine, target.python)
    r = _Resolver(sources, fallback, target, env)
    if constraints:
        r.pins = constraints.for_env(env)
    root_extras = wheel_extras(requires_dist) if extras is None else [canonicalize_name(e) for e in extras]
    root = RequirementIndex(requires_dist, env)
    level: list[_Job] = [
        _Job(req, (_short(req),), extra, 1) for req, extra, _text in root.select(root_extras)
    ]
    r.notes.extend(root.notes)
    roots = list(level)
    seen_names = {canonicalize_name(own_name)} if own_name else set()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        while level:
            # one lookup per new project of this level, in parallel; the first job for a project decides
            todo: dict[str, _Job] = {}
            for job in level:
                name = canonicalize_name(job.req.name)
                if name in seen_names or name in r.reached or name in todo:
                    continue
                todo[name] = job
            if len(r.reached) + len(todo) > MAX_DISTRIBUTIONS:
                r.notes.append(f"stopped after {MAX_DISTRIBUTIONS} distributions")
                todo = dict(list(todo.items())[: max(0, MAX_DISTRIBUTIONS - len(r.reached))])
            found = {
                name: (answer.dist, answer.why)
                for name, answer in zip(todo, r.lookup_all(pool, list(todo.values())), strict=True)
            }
            next_level: list[_Job] = []
            for job in level:
                name = canonicalize_name(job.req.name)
                if name in seen_names:
                    continue
                if name in found:
                    dist, why = found.pop(name)
                    if dist is None:
                        r.unresolved.append(
                            Unresolved(_short(job.req), job.chain, why or "not found", job.extra)
                        )
                        seen_names.add(name)
                        continue
                    r.reached[name] = Reached(dist, job.chain, job.extra)
                    r.extras_done[name] = set()
                reached = r.reached.get(name)
                if reached is None:
                    continue
                if reached.extra is not None and job.extra is None:  # also required unconditionally
                    r.reached[name] = reached = Reached(reached.dist, job.chain, None)
                    r.extras_done[name] = set()  # follow its requirements again as always installed
                wanted = {canonicalize_name(e) for e in job.req.extras} | {""}
                new = wanted - r.extras_done[name]
                if not new or job.depth >= MAX_DEPTH:
                    continue
                r.extras_done[name] |= new
                dist = reached.dist
                for sub, _extra, _text in r.requirements(name, dist, sorted(new - {""})):
                    next_level.append(_Job(sub, (*job.chain, _short(sub)), reached.extra, job.depth + 1))
            level = next_level
    # what the sources could not read when they were opened (an environment's dist-info, one line each)
    left_out = [f"{s.label}: {line}" for s in sources for line in getattr(s, "problems", ())]
    undated = sorted({name for s in sources for name in getattr(s, "undated", ())})
    if undated:
        shown = ", ".join(undated[:5]) + (f" and {len(undated) - 5} more" if len(undated) > 5 else "")
        r.notes.append(
            f"--exclude-newer not applied to {len(undated)} "
            f"{'project' if len(undated) == 1 else 'projects'} ({shown}): the index gives no upload time "
            "for their files (PEP 700), so the newest were taken whatever their date"
        )
    taken = list(r.reached.values())
    if split:
        for extra in _conflicting_extras(roots, r.reached):
            own = resolve_closure(
                requires_dist,
                target,
                sources,
                extras=[extra],
                fallback=fallback,
                own_name=own_name,
                constraints=constraints,
                split=False,
            )
            have = {(x.dist.name, x.dist.version) for x in taken}
            taken += [
                x for x in own.reached if x.extra is not None and (x.dist.name, x.dist.version) not in have
            ]
    return Closure(
        target=target,
        reached=tuple(taken),
        unresolved=tuple(r.unresolved),
        notes=(*r.notes, *r.missed_notes()),
        unreadable=(*left_out, *r.unreadable),
        undated=tuple(undated),
        sources=tuple(s.label for s in sources)
        + (
            (fallback.label,)
            if fallback is not None and any(_from(x, "knowledge") for x in r.reached.values())
            else ()
        ),
    )
