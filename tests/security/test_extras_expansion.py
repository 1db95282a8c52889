"""Class 7 of issue 30, cost that is not linear: expanding requirements and extras.

A METADATA with 9,999 requirements each behind its own extra (a 34 KB wheel, audited ``--offline``), or one
requirement asking for 936 extras of a distribution whose METADATA has 9,999 such requirements, used to
evaluate every requirement's marker once per extra (10^7 to 10^8 evaluations: minutes of CPU). Each
Requires-Dist is now parsed once and indexed by the extras its marker names
(:class:`cudaship.providers.closure.RequirementIndex`): the work is counted here, as marker evaluations, and
bounded by a small multiple of the number of requirements; never timed.
"""

from __future__ import annotations

import io
import json
import random
import string
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement

from cudaship.cli.main import main
from cudaship.wheel.metadata import marker_environment

N = 9_999
K = 936
TAG = "py3-none-manylinux_2_17_x86_64"
ENV = marker_environment("linux", "x86_64", "3.12")


class _Runaway(BaseException):
    """Raised by the counting spy past its bound (a BaseException: nothing on the way may swallow it)."""


class _Counter:
    def __init__(self) -> None:
        self.count = 0
        self.limit = 0


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Counter]:
    """Every :meth:`Marker.evaluate` in this process counted; past ``limit`` (when set) it raises."""
    counter = _Counter()
    real = Marker.evaluate

    def spy(self: Marker, *args: object, **kwargs: object) -> bool:
        counter.count += 1
        if counter.limit and counter.count > counter.limit:
            raise _Runaway(f"more than {counter.limit} marker evaluations")
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Marker, "evaluate", spy)
    yield counter


def _gated(n: int, prefix: str, extras: Sequence[str] = ()) -> list[str]:
    """``n`` requirements, the i-th behind its own extra: ``extras[i]``, past them ``e<i>``."""
    return [f'{prefix}{i}; extra == "{extras[i] if i < len(extras) else f"e{i}"}"' for i in range(n)]


#: 936 extras of two characters: as many as one Requires-Dist entry of at most 4,096 characters can ask for
SHORT = [a + b for a in string.ascii_lowercase for b in string.ascii_lowercase + string.digits]


def _wheel(directory: Path, name: str, requires: Sequence[str]) -> Path:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", "Version: 1.0"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{name}/__init__.py", "")
        zf.writestr(
            f"{name}-1.0.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {TAG}\n"
        )
        zf.writestr(f"{name}-1.0.dist-info/METADATA", "\n".join(lines) + "\n")
        zf.writestr(f"{name}-1.0.dist-info/RECORD", "")
    path = directory / f"{name}-1.0-{TAG}.whl"
    path.write_bytes(buffer.getvalue())
    return path


def _notes(out: str) -> str:
    return " ".join(json.loads(out)["wheels"][0]["notes"])


def test_9999_requirements_each_behind_its_own_extra(
    tmp_path: Path, evaluations: _Counter, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _wheel(tmp_path, "gated", _gated(N, "p"))
    assert wheel.stat().st_size < 64_000
    evaluations.limit = 20 * N
    code = main(["audit", "--offline", "--index-url", "", "-f", "json", str(wheel)])
    out = capsys.readouterr().out
    assert code == 1, out[-2000:]
    # each marker: once per OS the declared requirements are read for (3), then in the closure once with no
    # extra and once with the extra it names (before: once per extra until one holds, N * N / 2)
    assert evaluations.count <= 5 * N + 10, evaluations.count
    notes = _notes(out)
    assert "requirement p0 (extra e0)" in notes  # every extra is still followed
    assert "stopped after" in notes


def test_936_extras_of_a_9999_requirement_metadata(
    tmp_path: Path, evaluations: _Counter, capsys: pytest.CaptureFixture[str]
) -> None:
    house = tmp_path / "house"
    house.mkdir()
    _wheel(house, "dep", _gated(N, "q", SHORT))
    root = _wheel(tmp_path, "asker", [f"dep[{','.join(SHORT)}]"])
    assert len(SHORT) == K
    evaluations.limit = 20 * N
    code = main(
        ["audit", "--offline", "--index-url", "", "--find-links", str(house), "-f", "json", str(root)]
    )
    out = capsys.readouterr().out
    assert code == 1, out[-2000:]
    assert evaluations.count <= 2 * N + 10, evaluations.count  # XX
    notes = _notes(out)
    assert "1 distribution from wheelhouse" in notes
    # the extras asked for are followed: q0.. are looked for, q936 (no extra asked for it) is not
    assert "requirement q0:" in notes and "requirement q398:" in notes
    assert "q936" not in notes


def _reference(requires: Sequence[str], extras: Sequence[str]) -> list[tuple[str, str | None]]:
    """The expansion as pip reads it: each marker evaluated with no extra, then with each extra in turn."""
    out: list[tuple[str, str | None]] = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue

        def holds(extra: str, req: Requirement = req) -> bool:
            try:
                return req.marker is None or bool(req.marker.evaluate({**ENV, "extra": extra}))
            except Exception:
                return False

        if holds(""):
            out.append((text, None))
            continue
        chosen = next((e for e in extras if holds(e)), None)
        if chosen is not None:
            out.append((text, chosen))
    return out


def _random_marker(rng: random.Random, names: Sequence[str], depth: int = 0) -> str:
    if depth > 2 or rng.random() < 0.4:
        if rng.random() < 0.3:
            return rng.choice(
                [
                    'sys_platform == "linux"',
                    'sys_platform == "win32"',
                    'python_version >= "3.10"',
                    'os_name == "nt"',
                ]
            )
        op = rng.choice(["==", "!="] if rng.random() < 0.85 else ["in", "not in", "<", ">=", "==="])
        name = rng.choice(names)
        return f'extra {op} "{name}"' if rng.random() < 0.8 else f'"{name}" {op} extra'
    join = rng.choice(["and", "or"])
    return f"({_random_marker(rng, names, depth + 1)} {join} {_random_marker(rng, names, depth + 1)})"


def test_the_index_selects_what_pip_would() -> None:
    from cudaship.providers.closure import RequirementIndex

    rng = random.Random(30)
    names = ["a", "B", "c_d", "c-d", "", "E.f", "x", "not valid!"]
    for _ in range(2000):
        requires = [
            f"p{i}; {_random_marker(rng, names)}" if rng.random() < 0.9 else f"p{i}"
            for i in range(rng.randint(1, 6))
        ]
        extras = [rng.choice(names) for _ in range(rng.randint(0, 5))]
        got = [(text, extra) for _req, extra, text in RequirementIndex(requires, ENV).select(extras)]
        assert got == _reference(requires, extras), (requires, extras)


def test_markers_comparing_extra_otherwise_are_bounded(evaluations: _Counter) -> None:
    from cudaship.providers.closure import MAX_PER_EXTRA_EVALUATIONS, RequirementIndex

    requires = [f'p{i}; "zz{i}" in extra' for i in range(N)]
    index = RequirementIndex(requires, ENV)
    selected = index.select([f"e{i}" for i in range(K)])
    assert selected == []
    assert evaluations.count <= N + MAX_PER_EXTRA_EVALUATIONS
    assert any("otherwise than with ==" in note for note in index.notes)
    # each asked for once more costs nothing past the bound
    index.select([f"zz{i}" for i in range(K)])
    assert evaluations.count <= N + MAX_PER_EXTRA_EVALUATIONS
