"""A short run of every fuzz target (the mutation engine: no atheris needed), seeded with real files.

Each target runs for ``CUDASHIP_FUZZ_SECONDS`` (default 3) seconds; every input must return records or raise
a one-line CudashipError (a run past the fuzz engine's hang watchdog is a finding too). A sample of the inputs
then runs again under tracemalloc to hold the per-input memory ceiling of docs/reliability.md; no test asserts
time.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest
from fuzz._harness import TARGET_NAMES, load_target, measure
from fuzz._mutate import run_loop

SECONDS = float(os.environ.get("CUDASHIP_FUZZ_SECONDS", "3"))
#: Inputs of the grown corpus measured under tracemalloc besides the seeds.
SAMPLE = 24


@pytest.mark.parametrize("name", TARGET_NAMES, ids=TARGET_NAMES)
def test_fuzz_smoke(name: str, fuzz_seeds: Callable[[tuple[str, ...]], list[bytes]]) -> None:
    target = load_target(name)
    seeds = [s for s in fuzz_seeds(target.seed_kinds) if len(s) <= target.max_seed_size]
    if not seeds:
        pytest.skip(f"no seeds for {name} (toolchain or cached wheels missing)")
    result = run_loop(target, seeds, seconds=SECONDS, seed=0, stop_on_finding=False)
    problems = [f"{finding} (input of {len(data)} bytes)" for finding, data in result.findings]
    assert not problems, "\n".join(problems[:5])
    assert result.executions > len(seeds)

    grown = result.corpus[len(seeds) :]
    sample = seeds + random.Random(name).sample(grown, min(SAMPLE, len(grown)))
    m = measure(target, sample)  # its CPU times go to the fuzz report, never into an assertion
    assert m.over_memory == 0, (
        f"an input of {m.worst_peak_size} bytes peaked at {m.worst_excess:.2f}x the ceiling "
        f"({target.memory.describe()})"
    )
