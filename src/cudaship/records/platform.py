"""Where code runs: an operating system and a machine, as a platform tag or a program's target names them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TargetPlatform:
    """Where a wheel runs, from one platform tag: ``os`` is linux/windows/macos/any, ``machine`` may be
    None."""

    os: str
    machine: str | None
    tag: str

    @property
    def label(self) -> str:
        return f"{self.os}-{self.machine}" if self.machine else self.os
