"""Class 2 of issue 25: the policy's glob patterns are input. A pattern that would backtrack catastrophically
as a regular expression (``*a*a*a...b`` against a long name of ``a``) is matched in time linear in the path,
counted in characters consumed; one that does not compile (``[z-a]``) is a policy error naming its key when
the policy is loaded: exit 2, one line, never "internal error"."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from cudaship.checks.globs import Glob, GlobError, _compiled, compile_glob
from cudaship.cli.main import main

LONG = "pkg/" + "a" * 3000
BACKTRACKS = "pkg/" + "*a" * 40 + "b"


def _wheel(tmp_path: Path) -> Path:
    wheel = tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        zf.writestr(
            "pkg-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n",
        )
        zf.writestr(LONG, b"x")
        zf.writestr("pkg-1.0.dist-info/RECORD", "")
    return wheel


def test_backtracking_glob_is_matched_in_linear_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[audit.ships]\nrequired = ["{BACKTRACKS}"]\n')
    _compiled.cache_clear()
    code = main(["audit", "--offline", "--policy", str(policy), str(_wheel(tmp_path))])
    out = capsys.readouterr().out
    assert code == 1, out  # the required file is missing: a finding, not a hang
    assert BACKTRACKS in out
    glob = compile_glob(BACKTRACKS)
    # every member name consumed at most once per match, one step per character, whatever the pattern
    names = len(LONG) + 3 * len("pkg-1.0.dist-info/METADATA")
    assert 0 < glob.steps <= names


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('[audit.ships]\nrequired = ["lib/[z-a]*.so"]', "audit.ships.required[0]"),
        ('[audit.archs]\nlibraries = ["**", "x[b-a]"]', "audit.archs.libraries[1]"),
        ('[audit.closure]\nallow = ["libfoo[9-0].so"]', "audit.closure.allow[0]"),
        (
            '[[audit.forbidden_imports]]\nlibraries = ["**"]\npatterns = ["cu[z-a]*"]',
            "audit.forbidden_imports[0].patterns[0]",
        ),
        (
            '[audit.ownership.components.blas]\nowner = "libcublas"\nsentinels = ["cublas[z-a]"]',
            "audit.ownership.components.blas.sentinels[0]",
        ),
        ('[audit.variants.groups.g]\n"a[z-a].so" = ""\n"b.so" = ""', 'audit.variants.groups.g."a[z-a].so"'),
        ('[audit.ships]\nrequired = ["' + "x" * 2000 + '"]', "audit.ships.required[0]"),
    ],
)
def test_bad_pattern_is_a_policy_error_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, key: str
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(table + "\n")
    code = main(["audit", "--offline", "--policy", str(policy), str(_wheel(tmp_path))])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith(f"cudaship: error: {policy}: {key}: "), err


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/*.so", "a/b/c.so", True),
        ("**/*.so", "c.so", True),
        ("*.so", "a/c.so", False),
        ("a/**", "a/b/c", True),
        ("a/**/c", "a/c", True),
        ("a/**/c", "a/x/y/c", True),
        ("a/**/c", "a/xc", False),
        ("lib?.so", "lib/.so", False),
        ("lib[!0-9].so", "libx.so", True),
        ("lib[!0-9].so", "lib1.so", False),
        ("lib[]].so", "lib].so", True),
        ("lib[.so", "lib[.so", True),
    ],
)
def test_glob_syntax(pattern: str, path: str, expected: bool) -> None:
    assert Glob(pattern).match(path) is expected


def test_case_and_flat_modes() -> None:
    assert Glob("LIBCUDA*.so*", ignore_case=True).match("libcuda.so.1")
    assert Glob("*cublas*", flat=True).match("_ZN6cublas/x")  # symbol names: '*' crosses '/'
    assert not Glob("*cublas*").match("x/cublas")


def test_work_is_linear_in_the_path() -> None:
    glob = Glob("*a" * 200 + "b")
    for n in (1000, 4000):
        before = glob.steps
        assert not glob.match("a" * n)
        assert glob.steps - before == n  # one step per character, none repeated


def test_reversed_range_is_refused() -> None:
    with pytest.raises(GlobError, match="bad range z-a"):
        Glob("[z-a]")
