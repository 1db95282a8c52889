"""The repository as a newcomer meets it: the packaging metadata and the test command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SCRIPT = (REPO / "scripts" / "test").read_text()


def test_license_is_an_spdx_expression() -> None:
    """A `license = {text = ...}` table makes setuptools warn (deprecated since PEP 639)."""
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    backend = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    setuptools = next(r for r in backend if r.name == "setuptools")
    assert setuptools.specifier.contains("77") and not setuptools.specifier.contains("76")


def test_parallel_test_dependencies_are_test_extras() -> None:
    names = {Requirement(r).name for r in PYPROJECT["project"]["optional-dependencies"]["test"]}
    assert {"pytest-xdist", "filelock"} <= names


def test_ci_runs_the_readme_command() -> None:
    run = (REPO / ".ci" / "run").read_text()
    assert run.rstrip().splitlines()[-1] == "exec ./scripts/test"
    assert "\n./scripts/test\n" in (REPO / "README.md").read_text()


def test_every_install_step_is_announced_first() -> None:
    """No silent minutes: each apt-get / venv / pip step of scripts/test is preceded by a line saying what it
    installs."""
    lines = [line.strip() for line in SCRIPT.splitlines()]
    steps = [
        i for i, line in enumerate(lines) if re.search(r"apt-get (install|update)|-m venv|pip install", line)
    ]
    assert steps
    for i in steps:
        before = [line for line in lines[max(0, i - 4) : i] if line.startswith("say ")]
        assert before or lines[i].startswith("say "), f"scripts/test line {i + 1} runs without saying so"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param([], "-n auto", id="default-parallel"),
        pytest.param(["-n", "0"], "-n 0", id="n-given"),
        pytest.param(["-p", "no:xdist", "-x"], "-p no:xdist -x", id="xdist-off"),
    ],
)
def test_scripts_test_runs_in_parallel_unless_told(args: list[str], expected: str) -> None:
    """The argument handling of scripts/test, run with its setup steps replaced by no-ops."""
    start = SCRIPT.index("# Parallel by default")
    tail = SCRIPT[start:].replace(".venv/bin/python -m pytest", "echo pytest")
    done = subprocess.run(
        ["bash", "-c", "say() { :; }\nphase() { :; }\n" + tail, "scripts/test", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == f"pytest {expected}".strip()


@pytest.mark.parametrize("status", [0, 1])
def test_scripts_test_ends_with_the_time_of_each_phase(status: int) -> None:
    """Every line scripts/test prints carries the seconds since it started, and the last one the seconds of
    each phase (what docs/performance.md's first-run table is measured with); pytest's exit status is kept."""
    setup = r"(started|phase_started|phases)=|(say|phase)\(\)"
    head = "\n".join(line for line in SCRIPT.splitlines() if re.match(setup, line))
    start = SCRIPT.index("# Parallel by default")
    tail = SCRIPT[start:].replace(".venv/bin/python -m pytest", f"sh -c 'exit {status}'")
    done = subprocess.run(
        ["bash", "-c", f"{head}\napt_log=/dev/null\nphase apt\nphase venv\n{tail}", "scripts/test"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == status
    lines = done.stderr.strip().splitlines()
    assert all(re.match(r"scripts/test: \[\d+ s\] ", line) for line in lines), lines
    assert re.fullmatch(
        rf"scripts/test: \[\d+ s\] pytest exited with status {status}; "
        r"phases: apt \d+ s, venv \d+ s, pytest \d+ s; total \d+ s",
        lines[-1],
    ), lines[-1]


def _head() -> str:
    """scripts/test's own set-up: the clock, ``say``, ``phase`` and the trap for a failing step."""
    setup = r"(started|phase_started|phases)=|(say|phase)\(\)|trap .* ERR$"
    return "\n".join(line for line in SCRIPT.splitlines() if re.match(setup, line))


def test_scripts_test_relays_pips_lines_with_the_time() -> None:
    """pip's "Collecting" and "Successfully installed" lines were printed bare, on stdout (issue 35: each line
    scripts/test prints starts with "scripts/test: [N s]", as the README says)."""
    start = SCRIPT.index('say "installing cudaship and its test extras')
    block = SCRIPT[start : SCRIPT.index("phase pip", start)]
    pip = ".venv/bin/python -m pip install --progress-bar off -e '.[test]'"
    assert pip in block
    fake = "printf 'Collecting foo\\n  Downloading foo.whl\\nSuccessfully installed foo-1.0\\n'"
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{_head()}\n{block.replace(pip, fake)}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert all(re.match(r"scripts/test: \[\d+ s\] ", line) for line in lines), lines
    assert [line.split("] ", 1)[1] for line in lines[1:]] == [
        "  pip: Collecting foo",
        "  pip: Successfully installed foo-1.0",
    ]


def test_a_failing_step_ends_with_a_line_of_its_own() -> None:
    """A set-up step that fails (venv, pip) stops scripts/test (set -e) with a timed line naming it."""
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{_head()}\nsay starting\nsh -c 'exit 4'\nsay 'not reached'"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 4
    lines = done.stderr.splitlines()
    assert all(re.match(r"scripts/test: \[\d+ s\] ", line) for line in lines), lines
    assert lines[-1].endswith("""stopped: "sh -c 'exit 4'" failed with status 4"""), lines


@pytest.mark.parametrize("failing", ["", "ruff check", "ruff format", "mypy"])
def test_scripts_test_checks_lint_format_and_types_before_pytest(failing: str) -> None:
    """The habits run before the tests (issue 26): ruff check, ruff format --check and mypy --strict, each run
    (counted), and any failure ends scripts/test with its status before pytest starts."""
    start, end = SCRIPT.index("# The project's habits"), SCRIPT.index("# Parallel by default")
    block = SCRIPT[start:end]
    tools = {"ruff check": ".venv/bin/ruff check", "ruff format": ".venv/bin/ruff format", "mypy": "-m mypy"}
    for name, text in tools.items():
        assert text in block, name
    block = block.replace(".venv/bin/python -m mypy", "tool mypy").replace(".venv/bin/ruff", "tool ruff")
    fails = failing or "nothing"
    stub = f'tool() {{ echo "ran $1 $2" >&2; case "$1 $2" in "{fails}"*) return 3;; esac; return 0; }}'
    done = subprocess.run(
        ["bash", "-c", f'say() {{ echo "$*" >&2; }}\nphase() {{ :; }}\n{stub}\n{block}\necho pytest'],
        capture_output=True,
        text=True,
        check=False,
    )
    ran = [line for line in done.stderr.splitlines() if line.startswith("ran ")]
    assert len(ran) == 3, done.stderr  # ruff check, ruff format, mypy: every one runs, even after a failure
    if failing:
        assert done.returncode == 3 and "pytest" not in done.stdout, (done.stdout, done.stderr)
        assert "pytest not run" in done.stderr
    else:
        assert done.returncode == 0 and done.stdout.strip() == "pytest"


def test_a_file_left_open_fails_the_run(tmp_path: Path) -> None:
    """tests/conftest.py's guard: a file a test leaves open fails the session's last teardown, naming the
    file, with and without pytest-xdist, instead of a ResourceWarning printed after the run (issue 23)."""
    leaky = tmp_path / "test_leaky.py"
    leaky.write_text("import os\nKEPT = []\n\ndef test_keeps_it():\n    KEPT.append(open(os.devnull, 'rb'))")
    pytest_args = ["-p", "tests.conftest", "-q", "-p", "no:cacheprovider", str(leaky)]
    for parallel in (["-p", "no:xdist"], ["-n", "1"]):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *parallel, *pytest_args],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 1, done.stdout[-2000:]
        assert "files left open at the end of the session:" in done.stdout
        assert "<_io.FileIO name='/dev/null' mode='rb' closefd=True>" in done.stdout


def test_tests_are_laid_out_like_the_packages() -> None:
    """Each package of src/cudaship has a tests/<package>/ folder holding at least one test module, so the
    tests of a layer are found where the layer is."""
    src = Path(__file__).resolve().parents[1] / "src" / "cudaship"
    tests = Path(__file__).resolve().parent
    packages = sorted(p.name for p in src.iterdir() if (p / "__init__.py").is_file())
    missing = [name for name in packages if not list((tests / name).glob("test_*.py"))]
    assert len(packages) >= 17
    assert not missing, f"packages without tests/<package>/test_*.py: {missing}"
