"""audit --load without a driver (issue 32, class 9): the toolkit stub stands in for libcuda.so.1 only, so a
library that needs NVML (libnvidia-ml.so.1) fails for want of the driver, "no driver", not an error; a
library the wheel could ship that is missing stays judged. Records in, verdict out (a pure comparison)."""

from __future__ import annotations

from cudaship.checks.load import _no_driver
from cudaship.oracle.records import Observation

NVML = "libnvidia-ml.so.1: cannot open shared object file: No such file or directory"
CUDA = "libcuda.so.1: cannot open shared object file: No such file or directory"
OTHER = "libfoo.so.2: cannot open shared object file: No such file or directory"


def test_with_the_stub_nvml_is_still_no_driver() -> None:
    stub = Observation("python3", (), stub_libcuda="/usr/local/cuda/lib64/stubs/libcuda.so", driver="stub")
    assert _no_driver(stub, NVML)
    assert not _no_driver(stub, CUDA)  # the stub stands in for it: a failure naming it is real
    assert not _no_driver(stub, OTHER)


def test_without_driver_or_stub_every_driver_library_is_no_driver() -> None:
    absent = Observation("python3", (), driver="absent")
    assert _no_driver(absent, NVML) and _no_driver(absent, CUDA)
    assert not _no_driver(absent, OTHER)
    present = Observation("python3", (), driver="present")
    assert not _no_driver(present, NVML)
