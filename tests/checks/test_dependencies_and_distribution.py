"""The static load model follows shipped dependencies, and distribution libraries outside the manylinux policy
are judged from knowledge/data/distribution_libraries.toml (issue 21, round 2): libraries built here with gcc,
packed into wheels, audited, and (for the dependency) loaded for real in a child process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cudaship.checks.engine import audit_wheels
from cudaship.checks.table import load_policy
from cudaship.config import load_config
from cudaship.knowledge.system_libraries import distribution_library
from cudaship.records.findings import Severity, Status
from tests.checks.test_load_model import EXT, TAG, _audit, _checks, _gcc, _install, _load
from tests.fixtures.synthetic_wheels import write_wheel

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not on PATH")


def _wheel(tmp: Path, files: dict[str, bytes], tag: str = TAG) -> Path:
    out = tmp / "wheel"
    out.mkdir(parents=True, exist_ok=True)
    return write_wheel(out, name="pkg", version="1.0", tag=tag, files={"pkg/__init__.py": b"", **files})


def test_a_library_whose_shipped_dependency_fails_fails_with_it(tmp_path: Path) -> None:
    """pkg/_ext needs pkg/libmid.so.1 (shipped, $ORIGIN), which needs libabsent.so.7 that nothing provides:
    the loader refuses the module too. One error (libmid's), the module a note naming libmid."""
    build = tmp_path / "build"
    build.mkdir()
    absent = _gcc(build / "libabsent.so.7", "int gone(void) { return 1; }\n", soname="libabsent.so.7")
    mid = _gcc(
        build / "libmid.so.1",
        "int gone(void);\nint mid(void) { return gone(); }\n",
        soname="libmid.so.1",
        needs=(absent,),
    )
    ext = _gcc(
        build / EXT,
        "int mid(void);\nint ext(void) { return mid(); }\n",
        soname=EXT,
        needs=(mid,),
        flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN"),
    )
    wheel = _wheel(tmp_path, {f"pkg/{EXT}": ext.read_bytes(), "pkg/libmid.so.1": mid.read_bytes()})
    real = _load(
        _install([wheel], tmp_path / "site"), f"ctypes.CDLL({str(tmp_path / 'site' / 'pkg' / EXT)!r})"
    )
    assert real["ok"] is False and "libabsent.so.7" in str(real["error"])

    audit = _audit(wheel)
    checks = _checks(audit)
    root, dependent = checks["closure: pkg/libmid.so.1"], checks[f"closure: pkg/{EXT}"]
    assert (root.status, root.severity) == (Status.FAIL, Severity.ERROR)
    assert root.evidence[0].symbol == "libabsent.so.7"
    assert [f.file for f in root.evidence[1:]] == [f"pkg/{EXT}"]  # the dependents, listed under the cause
    assert (dependent.status, dependent.rule, dependent.severity) == (
        Status.FAIL,
        "dependency",
        Severity.NOTE,
    )
    assert "libmid.so.1" in dependent.reason and "libabsent.so.7" in dependent.reason
    errors = [c.name for c in audit.checks if c.failed and c.severity is Severity.ERROR]
    assert errors == ["closure: pkg/libmid.so.1"]  # one cause, one error
    # the per-library verdict the loader comparison reads: the module's import of libmid does not load
    (si,) = [i for i in audit.imports if i.file == f"pkg/{EXT}" and i.library == "libmid.so.1"]
    assert (si.ok, si.via) == (False, "unresolved")
    assert "libmid.so.1" in si.detail and "libabsent.so.7" in si.detail


#: a tag that names no Linux policy (auditwheel's "linux": nothing promised)
PLAIN = "cp311-cp311-linux_x86_64"


def _needing(tmp: Path, soname: str, tag: str = TAG) -> Path:
    """A wheel whose module needs ``soname``, a library it does not ship (built here only to link against)."""
    build = tmp / "build"
    build.mkdir(parents=True)
    dep = _gcc(build / soname, "int dep(void) { return 1; }\n", soname=soname)
    ext = _gcc(build / EXT, "int dep(void);\nint ext(void) { return dep(); }\n", soname=EXT, needs=(dep,))
    return _wheel(tmp, {f"pkg/{EXT}": ext.read_bytes()}, tag)


def test_a_default_distribution_library_is_a_warning_naming_the_package(tmp_path: Path) -> None:
    """Under a tag that names no policy (linux_x86_64); a manylinux tag makes it an error (issue 32, class 8:
    tests/checks/test_held_out_classes.py)."""
    lib = distribution_library("libnuma.so.1")
    assert lib is not None and lib.default
    audit = _audit(_needing(tmp_path, "libnuma.so.1", PLAIN))
    checks = _checks(audit)
    assert checks[f"closure: pkg/{EXT}"].status is Status.PASS
    warning = checks["closure: needs the system library libnuma.so.1 from libnuma1 / numactl-libs"]
    assert (warning.status, warning.rule, warning.severity) == (
        Status.FAIL,
        "distribution_library",
        Severity.WARNING,
    )
    assert "libnuma1 (Debian/Ubuntu) / numactl-libs (RHEL/Fedora)" in warning.reason
    (si,) = [i for i in audit.imports if i.library == "libnuma.so.1"]
    assert (si.ok, si.via) == (True, "distribution")

    # a policy makes it an error
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text('[audit.severity]\n"closure.distribution_library" = "error"\n')
    (strict,) = audit_wheels(
        [_needing(tmp_path / "again", "libnuma.so.1", PLAIN)],
        load_policy(load_config(policy_file)),
        workers=1,
    ).wheels
    assert _checks(strict)[warning.name].severity is Severity.ERROR


def test_a_distribution_library_not_installed_by_default_stays_an_error(tmp_path: Path) -> None:
    lib = distribution_library("libusb-1.0.so.0")
    assert lib is not None and not lib.default
    checks = _checks(_audit(_needing(tmp_path, "libusb-1.0.so.0")))
    result = checks[f"closure: pkg/{EXT}"]
    assert (result.status, result.severity) == (Status.FAIL, Severity.ERROR)
    assert "libusb-1.0-0 (Debian/Ubuntu)" in result.reason


def test_a_library_in_no_table_stays_an_error(tmp_path: Path) -> None:
    assert distribution_library("libnotpackaged.so.3") is None
    result = _checks(_audit(_needing(tmp_path, "libnotpackaged.so.3")))[f"closure: pkg/{EXT}"]
    assert (result.status, result.severity) == (Status.FAIL, Severity.ERROR)
    assert "not a system library" in result.reason
