"""The closure of a wheel's requirements does not depend on the order its parallel lookups happen to run in:
with a partly filled cache offline, and with an index that cannot be reached.

The order threads run in is not something a test can rely on, so the worker pool is replaced by one that
runs the lookups one after the other in an order the test chooses (as submitted, reversed), which is what two
schedules of the real pool can do."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

import cudaship.providers.closure as closure_module
from cudaship.providers.cache import DiskCache
from cudaship.providers.closure import resolve_closure
from cudaship.providers.http import Client
from cudaship.providers.index import IndexSource
from cudaship.providers.records import Closure, Target
from cudaship.providers.sources import KnowledgeSource
from tests.providers.conftest import LocalIndex, make_wheel

LINUX = Target("linux", "x86_64", "3.12")
T = TypeVar("T")
R = TypeVar("R")


class _OrderedPool:
    """A stand-in for the resolver's thread pool: ``map`` calls ``fn`` on the items in the order ``order``
    gives (and counts the calls), returning the results in the items' order, as the real pool does."""

    calls = 0

    def __init__(self, order: Callable[[list[int]], list[int]]) -> None:
        self.order = order

    def __call__(self, max_workers: int | None = None) -> _OrderedPool:
        return self

    def __enter__(self) -> _OrderedPool:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        items = list(items)
        results: dict[int, R] = {}
        for i in self.order(list(range(len(items)))):
            results[i] = fn(items[i])
            _OrderedPool.calls += 1
        return iter([results[i] for i in range(len(items))])


def _resolve_in_order(
    monkeypatch: pytest.MonkeyPatch,
    order: Callable[[list[int]], list[int]],
    requires: list[str],
    source_of: Callable[[Client], Any],
) -> tuple[Closure, Client]:
    monkeypatch.setattr(closure_module, "ThreadPoolExecutor", _OrderedPool(order))
    client = Client()
    result = resolve_closure(requires, LINUX, [source_of(client)], fallback=KnowledgeSource())
    return result, client


def _summary(c: Closure) -> tuple[object, ...]:
    return (
        [(r.dist.name, r.dist.version, r.dist.source.split(" ", 1)[0], r.chain) for r in c.reached],
        [(u.requirement, u.reason) for u in c.unresolved],
        c.notes,
        c.sources,
    )


def _partly_cached_index(local_index: LocalIndex, tmp_path: Path) -> DiskCache:
    """A cache filled online for part of the projects, then the index grows: alpha (requires delta) and beta
    are cached with their wheels; eps's page is cached, and the wheel of its 1.0 but not of its 2.0; gamma is
    not cached at all; nvidia-cublas is not on this index (the knowledge table knows it)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    tag = "py3-none-manylinux_2_17_x86_64"
    local_index.add(make_wheel(wheels, "alpha", "1.0", tag, {"alpha/libalpha.so": b"a"}, ("delta>=1",)))
    local_index.add(make_wheel(wheels, "beta", "1.0", tag, {"beta/libbeta.so": b"b"}))
    local_index.add(make_wheel(wheels, "delta", "1.0", tag, {"delta/libdelta.so": b"d"}))
    local_index.add(make_wheel(wheels, "eps", "1.0", tag, {"eps/libeps.so": b"e"}))
    local_index.add(make_wheel(wheels, "eps", "2.0", tag, {"eps/libeps.so": b"e2"}))
    cache = DiskCache(tmp_path / "cache")
    source = IndexSource(local_index.url, cache, Client())
    filled = resolve_closure(["alpha", "beta", "eps==1.0"], LINUX, [source])
    assert [(r.dist.name, r.dist.version) for r in filled.reached] == [
        ("alpha", "1.0"),
        ("beta", "1.0"),
        ("eps", "1.0"),
        ("delta", "1.0"),
    ]
    local_index.add(make_wheel(wheels, "gamma", "1.0", tag, {"gamma/libgamma.so": b"g"}))
    return cache


def test_a_partly_filled_cache_gives_one_closure_whatever_the_lookup_order(
    local_index: LocalIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = _partly_cached_index(local_index, tmp_path)
    served = local_index.requests
    # the misses (gamma's page, eps 2.0's wheel, nvidia-cublas's page) first in one order, last in the other
    requires = ["gamma", "eps>=2", "nvidia-cublas==13.1.1.3", "alpha", "beta"]

    def offline(client: Client) -> IndexSource:
        return IndexSource(local_index.url, cache, client, offline=True)

    runs = [
        _resolve_in_order(monkeypatch, order, requires, offline)
        for order in (lambda ix: ix, lambda ix: ix[::-1])
    ]
    (first, first_client), (second, second_client) = runs
    assert _summary(first) == _summary(second)
    assert first_client.fetched == second_client.fetched
    assert local_index.requests == served  # offline: the index was never asked
    # a miss is that project's alone: the cache still answers for the others, at every level
    sources = {r.dist.name: r.dist.source.split(" ", 1)[0] for r in first.reached}
    assert sources == {"alpha": "index", "beta": "index", "delta": "index", "nvidia-cublas": "knowledge"}
    unresolved = {u.requirement: u.reason for u in first.unresolved}
    assert sorted(unresolved) == ["eps>=2", "gamma"]
    assert "gamma/: not in the cache (offline)" in unresolved["gamma"]
    assert "eps-2.0-py3-none-manylinux_2_17_x86_64.whl: not in the cache (offline)" in unresolved["eps>=2"]
    assert not any("not asked again" in n for n in first.notes)
    assert any("no answer for 3 projects (eps, gamma, nvidia-cublas)" in n for n in first.notes)
    # pages of alpha, beta, delta, eps and their wheels but eps 2.0's: 7 answers from the cache
    assert first_client.fetched.cache_hits == 7 and first_client.fetched.requests == 0


def test_an_unreachable_index_is_asked_once_whatever_the_lookup_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requires = ["nvidia-cublas==13.1.1.3", "nvidia-cuda-runtime==13.0.96", "nothing-known", "gamma"]

    def unreachable(client: Client) -> IndexSource:
        return IndexSource("http://127.0.0.1:9/simple", DiskCache(tmp_path / "c"), client)

    _OrderedPool.calls = 0
    runs = [
        _resolve_in_order(monkeypatch, order, requires, unreachable)
        for order in (lambda ix: ix, lambda ix: ix[::-1])
    ]
    (first, first_client), (second, second_client) = runs
    assert _summary(first) == _summary(second)
    # the first lookup goes alone and finds the index dead; the others skip it (one request per run)
    assert first_client.fetched.requests == second_client.fetched.requests == 1
    assert _OrderedPool.calls == 2 * (len(requires) - 1)
    assert [r.dist.source.split(" ", 1)[0] for r in first.reached] == ["knowledge"] * len(first.reached)
    assert {r.dist.name for r in first.reached} >= {"nvidia-cublas", "nvidia-cuda-runtime"}
    assert sum("cannot answer" in n and "not asked again" in n for n in first.notes) == 1
