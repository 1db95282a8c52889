"""Policy TOML: ``config.py`` load_config (a cudaship.toml read from disk) and ``checks/policy.py``
load_policy (every [audit] and [archs] key validated)."""

from __future__ import annotations

from cudaship.checks.table import load_policy
from cudaship.config import load_config
from fuzz._harness import Target
from fuzz.targets._scratch import scratch


def run(data: bytes) -> object:
    path = scratch() / "cudaship.toml"
    path.write_bytes(data)
    policy = load_policy(load_config(path))
    policy.arch_table()
    return policy


TARGET = Target(
    name="policy",
    summary="load_config + load_policy on examples/policies/*.toml",
    run=run,
    seed_kinds=("policy",),
    modules=("checks/policy.py", "config.py", "knowledge/arch_table.py"),
)
