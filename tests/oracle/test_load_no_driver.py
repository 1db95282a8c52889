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


def test_a_static_error_the_loader_disproves_is_a_warning() -> None:
    """Issue 32, class 9: the closure said pkg/_C.so's libfoo.so.1 does not resolve; audit --load loaded
    pkg/_C.so with every DT_NEEDED satisfied. The loader's answer stands: the error becomes a warning saying
    so; a library the loader could not load keeps its error."""
    from cudaship.checks.load import overruled
    from cudaship.checks.records import LoadCheck, LoadComparison
    from cudaship.records.findings import CheckResult, Severity, Status

    def error(lib: str) -> CheckResult:
        return CheckResult(
            f"closure: {lib}", "closure", Status.FAIL, "libfoo.so.1 does not resolve", (), None
        )

    load = LoadCheck(
        comparisons=(
            LoadComparison(
                "pkg/_C.so", "libfoo.so.1", "does not resolve", "loaded /site/foo/libfoo.so.1", False
            ),
            LoadComparison("pkg/_C.so", "libc.so.6", "resolves (system)", "loaded /lib/libc.so.6", True),
            LoadComparison("pkg/_D.so", "libbar.so.1", "does not resolve", "the library did not load", False),
        )
    )
    c, d = overruled((error("pkg/_C.so"), error("pkg/_D.so")), load)
    assert c.severity is Severity.WARNING and "audit --load" in c.reason
    assert d.severity is Severity.ERROR


def test_a_torch_extension_is_imported_after_torch() -> None:
    """Issue 32, class 9: a torch extension that does not declare torch (an undeclared host) was imported
    without `import torch` first, and failed where its users' code works. Every import and the dlopen after
    imports now import the host packages' modules first; the dlopen alone stays alone."""
    from cudaship.oracle.records import StepKind
    from cudaship.oracle.run import host_modules, plan_probes

    assert host_modules(("torch",)) == ("torch",)
    probes = plan_probes(("ext",), ("ext",), {"ext/_C.so": "/site/ext/_C.so"}, (), host_modules(("torch",)))
    labels = [p.label for p in probes]
    assert labels[0] == "import ext (after import torch)"
    (after, alone) = probes[1:]
    assert [s.target for s in after.before if s.kind is StepKind.IMPORT] == ["torch", "ext"]
    assert alone.before == ()


def test_a_stray_helper_package_is_not_the_package() -> None:
    """Issue 32, class 9: a stray top-level helper package (build_tools/) beside the project's own package
    counted as the package failing. When a public package is named after the project, only those are the
    API; the others are imported alone, and their failure is a note. Without such a package, all stay."""
    from cudaship.oracle.run import main_modules

    packages = frozenset({"cupy", "cupyx", "build_tools"})
    tops = ("build_tools", "cupy", "cupyx")
    assert main_modules(tops, packages, "cupy-cuda12x") == ("cupy", "cupyx")
    assert main_modules(("bitsandbytes", "tests"), frozenset({"bitsandbytes", "tests"}), "bitsandbytes") == (
        "bitsandbytes",
    )
    assert main_modules(("alpha", "beta"), frozenset({"alpha", "beta"}), "gamma") == ("alpha", "beta")
