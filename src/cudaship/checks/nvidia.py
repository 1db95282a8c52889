"""NVIDIA library facts the checks need, over :mod:`cudaship.knowledge.libraries`."""

from __future__ import annotations

from dataclasses import dataclass

from cudaship.checks.context import AuditContext
from cudaship.wheel.metadata import DeclaredRequirement


@dataclass(frozen=True)
class NvidiaLibrary:
    name: str


def library(name: str) -> NvidiaLibrary | None:
    return None


def provided_by(lib: NvidiaLibrary, declared: tuple[DeclaredRequirement, ...], os_name: str) -> str | None:
    return None


def installed_by(ctx: AuditContext, directory: str, name: str) -> str | None:
    return None


def requirement_hint(ctx: AuditContext, name: str) -> str | None:
    return None
