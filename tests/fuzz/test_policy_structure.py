"""Policy fuzzing by structure (Hypothesis): byte mutations of TOML mostly stop at the TOML parser, so here
the parsed example policies are mutated as data (keys dropped or added, values replaced by any TOML value:
strings, numbers, booleans, dates, arrays, tables) and fed to load_policy. Every result is a Policy or a
one-line CudashipError naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudaship.checks.table import load_policy
from cudaship.config import ProjectConfig, read_toml
from cudaship.errors import CudashipError

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "policies").glob("*.toml"))
WORDS = ["8.0", "9.0a", "sm_90", "compute_120f", "cu130", "13.0", "x86_64", "AMD64", "**/*.so", "[", "newest"]
WORDS += ["{cu}", "{major}", "{next_major}", "*", "", " ", "\n", "..", "lib*.so.*", "nvidia-cuda-runtime>=13"]

KEYS = st.sampled_from(WORDS) | st.text(max_size=8)
SCALARS = st.one_of(
    st.sampled_from(WORDS),
    st.text(max_size=12),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.dates(),
    st.datetimes(),
    st.times(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(WORDS) | st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _mutate(value: Any, draw: st.DrawFn) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            choice = draw(st.integers(0, 11))
            if choice == 0:
                continue
            out[key] = draw(VALUES) if choice == 1 else _mutate(item, draw)
        if draw(st.integers(0, 7)) == 0:
            out[draw(KEYS)] = draw(VALUES)
        return out
    if isinstance(value, list):
        items = [_mutate(v, draw) for v in value if draw(st.integers(0, 9))]
        if draw(st.integers(0, 7)) == 0:
            items.append(draw(VALUES))
        return items
    return draw(VALUES) if draw(st.integers(0, 3)) == 0 else value


@st.composite
def mutated_policies(draw: st.DrawFn) -> tuple[Path, dict[str, Any]]:
    path = draw(st.sampled_from(EXAMPLES))
    return path, _mutate(read_toml(path), draw)


@pytest.mark.skipif(not EXAMPLES, reason="no example policies")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_policies())
def test_mutated_policy_loads_or_fails_in_one_line(case: tuple[Path, dict[str, Any]]) -> None:
    path, data = case
    try:
        policy = load_policy(ProjectConfig(data, path))
        policy.arch_table()
    except CudashipError as e:
        text = str(e)
        assert "\n" not in text and text.startswith(str(path)), text
