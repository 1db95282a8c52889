"""``audit --load`` on byte copies standing in for symlinks (issue 32, class 9).

A wheel cannot hold symlinks, so a wheel ships ``libfoo.so``, ``libfoo.so.0`` and ``libfoo.so.0.1.2`` as three
files with the same bytes and the one SONAME ``libfoo.so.0``. A user's process loads that library once, by the
name its dependents need (``libfoo.so.0``). Dlopening each copy by its own path maps a second instance of the
library beside the first: here its constructor registers a name in a registry library (as protobuf's generated
descriptors or LLVM's command-line options do), and the registry aborts on the second registration, exactly
as those libraries abort when two copies of one library are mapped. The loader check must load the library
once, by that name, and report the other files as copies of it, never as failures; the static audit groups
the same files as copies of one library (one cause, once).

Everything is gcc-built in the test; the wheel is installed by pip into a fresh venv and loaded for real."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from tests.oracle.builders import build_so, build_wheel, function, needs_gcc

pytestmark = needs_gcc

REGISTRY = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const char *names[64];
static int count;
/* a process-wide registry, as protobuf's descriptor pool: a second registration of one name aborts */
void registry_add(const char *name) {
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0) {
            fprintf(stderr, "registry: %s registered more than once\n", name);
            abort();
        }
    names[count++] = name;
}
"""
REGISTERS = r"""
void registry_add(const char *name);
__attribute__((constructor)) static void register_me(void) { registry_add("foo.desc"); }
int foo_fn(void) { return 1; }
"""
INIT = """import ctypes, os
# the package's core library, which needs libfoo.so.0 (RUNPATH $ORIGIN/lib)
_core = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "_core.so"))
"""
COPIES = ("copiespkg/lib/libfoo.so", "copiespkg/lib/libfoo.so.0", "copiespkg/lib/libfoo.so.0.1.2")


def _wheel(root: Path) -> Path:
    b = root / "build"
    registry = build_so(b / "lib" / "libregistry.so.1", REGISTRY, soname="libregistry.so.1")
    foo = build_so(
        b / "lib" / "libfoo.so.0", REGISTERS, soname="libfoo.so.0", link=[registry], runpath=["$ORIGIN"]
    )
    core = build_so(b / "_core.so", function("core_fn", ["foo_fn"]), link=[foo], runpath=["$ORIGIN/lib"])
    files: dict[str, bytes | Path] = {
        "copiespkg/__init__.py": INIT.encode(),
        "copiespkg/_core.so": core,
        "copiespkg/lib/libregistry.so.1": registry,
    }
    for copy in COPIES:  # the same bytes under three names: what a wheel ships for two symlinks
        files[copy] = foo
    return build_wheel(root / "dist", "copiespkg", "1.0", files, top_level=["copiespkg"])


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("copies")
    wheel = _wheel(root)
    out = root / "a.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDASHIP_OFFLINE", "1")
        mp.delenv("GITHUB_ACTIONS", raising=False)
        code = main(
            [
                *("audit", "--no-progress", "--load", "--offline", "--load-timeout", "30"),
                *("-f", "json", "-o", str(out), "--report", f"text={root / 'a.txt'}", str(wheel)),
            ]
        )
    return {"code": code, "json": json.loads(out.read_text()), "text": (root / "a.txt").read_text()}


def test_copies_are_loaded_once_and_never_fail(audited: dict[str, Any]) -> None:
    data = audited["json"]
    load = {c["name"]: c for c in data["checks"] if c["family"] == "load"}
    failures = [c for c in load.values() if c["status"] == "fail" and c["severity"] == "error"]
    assert not failures, failures  # no copy's second instance counted as the library failing
    labels = [p["label"] for p in data["wheels"][0]["load"]["probes"]]
    assert not [x for x in labels if x.startswith("dlopen copiespkg/lib/libfoo.so ")], labels
    assert not [x for x in labels if "libfoo.so.0.1.2" in x], labels
    assert "dlopen copiespkg/lib/libfoo.so.0 (after import copiespkg)" in labels  # by the name others need
    copies = load["load: copies of one library"]
    assert (copies["status"], copies["severity"], copies["rule"]) == ("fail", "note", "copy")
    assert "copiespkg/lib/libfoo.so.0" in copies["reason"]
    assert {e["file"] for e in copies["evidence"]} == {
        "copiespkg/lib/libfoo.so",
        "copiespkg/lib/libfoo.so.0.1.2",
    }
    # counted once: _core.so, libfoo.so.0 and libregistry.so.1, each agreeing
    line = data["wheels"][0]["load"]["line"]
    assert line.startswith("loader: 3/3 libraries agree"), line
    assert audited["code"] == ExitCode.OK


def test_the_static_audit_and_the_report_name_the_same_copies(audited: dict[str, Any]) -> None:
    """The static audit's copies (one cause, once) are the loader check's: the text report says so."""
    assert "copies of one library" in audited["text"]
    assert "libfoo.so.0.1.2" in audited["text"]


def test_copies_of_a_library_that_fails_fail_once_on_both_sides(tmp_path: Path) -> None:
    """Copies of a library whose dependency nothing provides: the static audit reports one closure error
    naming the copies (one cause, once), and the loader one failure, of the copy loaded, naming the same
    copies; before, each copy was a load failure of its own (three errors for one library)."""
    b = tmp_path / "build"
    gone = build_so(b / "gone" / "libgone.so.3", function("gone_fn"), soname="libgone.so.3")
    bar = build_so(
        b / "lib" / "libbar.so.2", function("bar_fn", ["gone_fn"]), soname="libbar.so.2", link=[gone]
    )
    names = ("barpkg/lib/libbar.so", "barpkg/lib/libbar.so.2", "barpkg/lib/libbar.so.2.0.1")
    files: dict[str, bytes | Path] = {"barpkg/__init__.py": b"", **{n: bar for n in names}}
    wheel = build_wheel(tmp_path / "dist", "barpkg", "1.0", files, top_level=["barpkg"])
    out = tmp_path / "a.json"
    code = main(["audit", "--no-progress", "--load", "--offline", "-f", "json", "-o", str(out), str(wheel)])
    data = json.loads(out.read_text())
    errors = [c for c in data["checks"] if c["status"] == "fail" and c["severity"] == "error"]
    by_family = {f: [c for c in errors if c["family"] == f] for f in ("closure", "load")}
    (closure,) = by_family["closure"]
    assert "the same in 2 copies" in closure["reason"], closure
    (failure,) = by_family["load"]
    assert failure["name"] == "load: barpkg/lib/libbar.so.2", failure
    assert "libgone.so.3: cannot open shared object file" in failure["reason"]
    copies = {c["name"]: c for c in data["checks"]}["load: copies of one library"]
    assert "it does not load" in copies["reason"]
    assert {e["file"] for e in copies["evidence"]} == {names[0], names[2]}
    assert data["wheels"][0]["load"]["line"].startswith("loader: 1/1 library agrees")
    assert code == ExitCode.FINDINGS


def test_what_the_loader_says_of_the_copy_loaded_holds_for_each_copy() -> None:
    """The static audit's closure error is named after the first copy (pkg/lib/libfoo.so); the loader loaded
    the library once, as pkg/lib/libfoo.so.0, with every import satisfied: the error is overruled for the
    copies too (issue 32, class 9)."""
    from cudaship.checks.load import overruled
    from cudaship.checks.records import LoadCheck, LoadComparison
    from cudaship.records.findings import CheckResult, Severity, Status

    error = CheckResult(
        "closure: pkg/lib/libfoo.so", "closure", Status.FAIL, "libbar.so.1 does not resolve", ()
    )
    load = LoadCheck(
        comparisons=(
            LoadComparison(
                "pkg/lib/libfoo.so.0", "libbar.so.1", "does not resolve", "loaded /s/libbar.so.1", False
            ),
        )
    )
    (alone,) = overruled((error,), load)
    assert alone.severity is Severity.ERROR  # without the copies, nothing says libfoo.so is that library
    (copy,) = overruled((error,), load, (("pkg/lib/libfoo.so.0", "pkg/lib/libfoo.so"),))
    assert copy.severity is Severity.WARNING and "audit --load" in copy.reason
