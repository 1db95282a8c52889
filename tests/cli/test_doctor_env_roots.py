"""``doctor --env`` (and ``audit --env``) resolve what a user types to site-packages: a virtual environment's
root, an installation prefix, its interpreter or a site-packages directory all read the same distributions;
an environment holding none is bad input (exit 2, one line naming the path), never a pass over nothing.

The environments are real ones, made by ``python -m venv`` in the test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.errors import UsageError
from cudaship.exitcodes import ExitCode
from cudaship.providers.sources import EnvSource, site_packages, venv_interpreter


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDASHIP_LIBCUDA", str(tmp_path / "no-libcuda.so"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)


@pytest.fixture(scope="module")
def venv_with_pip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real virtual environment with pip in it (ensurepip installs pip: one distribution at least)."""
    root = tmp_path_factory.mktemp("venvs") / "with-pip"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True, timeout=300)
    return root


def _python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def _distributions(capsys: pytest.CaptureFixture[str], env: str) -> tuple[int, list[str], list[str]]:
    code = main(["doctor", "--no-system", "--format", "json", "--env", env])
    doc = json.loads(capsys.readouterr().out)
    return code, doc["environment"]["sites"], sorted(d["name"] for d in doc["environment"]["distributions"])


def test_venv_root_interpreter_and_site_packages_read_the_same(
    venv_with_pip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    by_root = _distributions(capsys, str(venv_with_pip))
    by_python = _distributions(capsys, str(_python(venv_with_pip)))
    (site,) = site_packages(str(venv_with_pip))
    by_site = _distributions(capsys, str(site))
    assert by_root[0] == by_python[0] == by_site[0] == ExitCode.OK
    assert "pip" in by_root[2]
    # the root reads what its interpreter reports (purelib and platlib) and what its site-packages holds
    assert by_root[1:] == by_python[1:] == by_site[1:]
    assert Path(by_root[1][0]) == site.resolve()


def test_the_interpreter_of_a_venv_is_found_from_its_root_or_its_site_packages(
    venv_with_pip: Path, tmp_path: Path
) -> None:
    """``doctor --env DIR --confirm`` runs the environment's own interpreter: the layout that
    :func:`site_packages` reads the directories from also names it (``bin/python``,
    ``Scripts/python.exe``)."""
    (site,) = site_packages(str(venv_with_pip))
    python = _python(venv_with_pip.resolve())
    assert venv_interpreter(venv_with_pip) == python
    assert venv_interpreter(site) == python
    assert venv_interpreter(tmp_path) is None  # no pyvenv.cfg above it


def test_a_prefix_without_pyvenv_cfg_is_read_from_its_layout(venv_with_pip: Path, tmp_path: Path) -> None:
    """An installation prefix (no pyvenv.cfg): every ``lib/python3*/site-packages`` and ``lib64`` one."""
    (site,) = site_packages(str(venv_with_pip))
    prefix = tmp_path / "prefix"
    (prefix / "lib" / site.parent.name).mkdir(parents=True)
    (prefix / "lib" / site.parent.name / "site-packages").symlink_to(site)
    (prefix / "lib64").symlink_to(prefix / "lib")  # as Fedora's and many venvs' lib64: one directory
    assert [p.resolve() for p in site_packages(str(prefix))] == [site.resolve()]
    windows = tmp_path / "winenv" / "Lib" / "site-packages"
    windows.mkdir(parents=True)
    assert site_packages(str(tmp_path / "winenv")) == [windows]


@pytest.mark.parametrize("kind", ["empty venv", "empty directory", "tmp"])
def test_an_environment_with_no_distribution_is_bad_input(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if kind == "empty venv":
        env = tmp_path / "bare"
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(env)],
            check=True,
            capture_output=True,
            timeout=300,
        )
    elif kind == "empty directory":
        env = tmp_path / "nothing"
        env.mkdir()
    else:
        env = Path(tmp_path)  # a directory of other things, like /tmp
        (env / "notes.txt").write_text("not a package\n")
    targets = [str(env)] + ([str(_python(env))] if kind == "empty venv" else [])
    for target in targets:
        code = main(["doctor", "--env", target])
        out, err = capsys.readouterr()
        assert code == ExitCode.BAD_INPUT == 2
        assert out == ""
        assert err.count("\n") == 1
        assert err.startswith(f"cudaship: error: {target}: no installed distribution (*.dist-info) found")


def test_audit_env_source_with_no_distribution_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same rule where an environment is a provider source: ``audit --env DIR``."""
    with pytest.raises(UsageError, match="no installed distribution") as info:
        EnvSource(str(tmp_path))
    assert info.value.path == str(tmp_path)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    wheel = Path(__file__).resolve().parents[2] / "examples" / "libvecadd.so"  # never read: the env is first
    code = main(["audit", "--offline", "--env", str(tmp_path), str(wheel)])
    out, err = capsys.readouterr()
    assert (code, out) == (ExitCode.BAD_INPUT, "")
    assert err.startswith(f"cudaship: error: {tmp_path}: no installed distribution (*.dist-info) found")


def test_a_pyvenv_cfg_that_is_a_fifo_is_refused_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pyvenv.cfg is input like METADATA and RECORD: a FIFO named so would block a plain read forever; it is
    refused in one line naming it (exit 2), through safe_read."""
    import os

    root = tmp_path / "venv"
    info = root / "lib" / "python3.11" / "site-packages" / "a-1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: a\nVersion: 1\n")
    (info / "RECORD").write_text("a-1.dist-info/METADATA,,\n")
    os.mkfifo(root / "pyvenv.cfg")
    code = main(["doctor", "--no-system", "--env", str(root)])
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT
    assert err == f"cudaship: error: {root / 'pyvenv.cfg'}: not a regular file (a FIFO)\n"


@pytest.mark.parametrize(
    "order",
    [
        ["--env", "--require-gpu", "SITE"],
        ["--require-gpu", "--env", "SITE"],
        ["SITE", "--env", "--require-gpu"],
        ["--env", "SITE", "--require-gpu"],
        ["--env", "--no-system", "SITE"],
    ],
    ids=["env-flag-then-dir", "flag-env-dir", "dir-first", "env-dir-flag", "env-other-option-dir"],
)
def test_env_and_its_directory_in_any_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, order: list[str]
) -> None:
    """``--env`` takes an optional value: ``doctor --env --require-gpu DIR`` was refused ("give no PATH with
    it", issue 35); options and DIR go in any order, as with any click command."""
    site = tmp_path / "site-packages"
    (site / "demo-1.0.dist-info").mkdir(parents=True)
    (site / "demo-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
    (site / "demo-1.0.dist-info" / "RECORD").write_text("demo-1.0.dist-info/METADATA,,\n")
    argv = [str(site) if a == "SITE" else a for a in order]
    code = main(["doctor", "--no-system", "--format", "json", *argv])
    out, err = capsys.readouterr()
    assert code == (ExitCode.NO_GPU if "--require-gpu" in order else ExitCode.OK), err
    doc = json.loads(out)
    assert [d["name"] for d in doc["environment"]["distributions"]] == ["demo"]
    assert [Path(s) for s in doc["environment"]["sites"]] == [site.resolve()]


def test_env_with_a_path_besides_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["doctor", "--env", str(tmp_path), "other.so"])
    assert code == ExitCode.BAD_INPUT
    assert capsys.readouterr().err == (
        "cudaship: error: --env checks one environment: give it no PATH besides (--env DIR)\n"
    )
