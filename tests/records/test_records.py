"""records/: the floor's records are plain values. Every class defined there is a frozen dataclass
(assigning a field raises) or an Enum, so a record handed from a reader to a check to a renderer cannot
change on the way."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import pkgutil

import pytest

import cudaship.records as floor


def _classes() -> list[type]:
    found = []
    for info in pkgutil.iter_modules(floor.__path__):
        module = importlib.import_module(f"cudaship.records.{info.name}")
        classes = inspect.getmembers(module, inspect.isclass)
        found += [c for _, c in classes if c.__module__ == module.__name__]
    return found


def test_the_floor_holds_the_shared_records() -> None:
    names = {c.__name__ for c in _classes()}
    assert {"FileReport", "WheelInfo", "CudaLinkage", "TargetPlatform", "CheckResult", "Finding"} <= names
    assert {"HostBinary", "DeviceCode", "FatbinContainer"} <= names


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__name__)
def test_every_record_is_frozen_or_an_enum(cls: type) -> None:
    if issubclass(cls, enum.Enum):
        return
    assert dataclasses.is_dataclass(cls), f"{cls.__name__} is not a dataclass"
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen, f"{cls.__name__} is not frozen"
