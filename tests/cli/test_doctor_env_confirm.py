"""``doctor --env --confirm`` on small real virtual environments built in the test (gcc, the real
nvidia-cuda-runtime 13 wheel; tests/fixtures/preload_env.py), offline: each distribution's modules imported in
fresh children, what the real loader mapped compared with the simulation, per importer and DT_NEEDED."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cudaship.cli.main import main
from tests.fixtures.preload_env import EXT, build_preload_env, dist, ext_module, make_venv, shared_lib

SCHEMA = (
    Path(__file__).resolve().parents[2] / "src" / "cudaship" / "render" / "schemas" / "doctor-env.schema.json"
)

pytestmark = [
    pytest.mark.network,  # the nvidia-cuda-runtime wheel, cached after the first run
    pytest.mark.skipif(
        shutil.which("gcc") is None or not sys.platform.startswith("linux"), reason="needs gcc and glibc"
    ),
]


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDASHIP_LIBCUDA", str(tmp_path / "no-libcuda.so"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)


@pytest.fixture(scope="module")
def preloading(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_preload_env(tmp_path_factory.mktemp("confirm-torch"), torch_version="2.11.0")


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """alpha and beta each bring their own librp.so.1 through their DT_RUNPATH: in one process beta gets
    alpha's (loaded first, same SONAME); alone, its own. gamma needs a library nothing installs; delta's
    import hangs."""
    root = tmp_path_factory.mktemp("confirm-one-process")
    python, site = make_venv(root / "venv")
    build = root / "build"
    for value, name in enumerate(("alpha", "beta")):
        lib = shared_lib(build / f"{name}-lib", "librp.so.1", "rp_value", value)
        ext = ext_module(
            build / name,
            "_rp",
            "int rp_value(void);",
            "rp_value()",
            f"-L{lib.parent}",
            "-l:librp.so.1",
            "-Wl,--enable-new-dtags",
            f"-Wl,-rpath,$ORIGIN/../{name}.libs",
        )
        files: dict[str, Path | str] = {f"{name}/__init__.py": "from . import _rp\n", f"{name}/_rp{EXT}": ext}
        files[f"{name}.libs/librp.so.1"] = lib
        dist(site, name, "1.0", files)
    gone = shared_lib(build / "gone", "libgone.so.9", "gone_value")
    ext = ext_module(
        build / "gamma", "_g", "int gone_value(void);", "gone_value()", f"-L{gone.parent}", "-l:libgone.so.9"
    )
    dist(site, "gamma", "1.0", {"gamma/__init__.py": "from . import _g\n", f"gamma/_g{EXT}": ext})
    dist(site, "delta", "1.0", {"delta/__init__.py": "import time\ntime.sleep(60)\n"})
    # pure Python: epsilon requires alpha (its import loads alpha's library), zeta only under an extra
    dist(site, "epsilon", "1.0", {"epsilon/__init__.py": "import alpha\n"}, requires=("alpha>=1",))
    dist(site, "zeta", "1.0", {"zeta/__init__.py": ""}, requires=('alpha; extra == "x"',))
    return python, site


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", "--format", "json", *argv])
    doc = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(doc)
    return code, doc


def test_the_loader_agrees_with_the_simulation_on_runpath_and_preloading(
    capsys: pytest.CaptureFixture[str], preloading: tuple[Path, Path]
) -> None:
    python, site = preloading
    code, doc = run_json(capsys, "--env", str(python), "--confirm")
    assert code == 0
    confirm = doc["confirm"]
    assert confirm["python"] == str(python)
    children = {c["module"]: c for c in confirm["children"]}
    assert set(children) == {"torch", "sysbound", "rpathpkg"}
    assert all(c["ok"] for c in children.values())
    # the others import torch first, as the simulated process does
    assert children["sysbound"]["before"] == ["torch"] and children["torch"]["before"] == []
    assert confirm["disagree"] == 0 and confirm["disagreements"] == []
    assert confirm["agree"] >= 3
    assert not [f for f in doc["findings"] if f["rule"] in ("loader-disagrees", "import-failed")]
    libs = {lib["path"]: lib for lib in doc["libraries"]}
    ext = str(site / f"sysbound/_ext{EXT}")
    (cudart,) = [i for i in libs[ext]["imports"] if i["name"] == "libcudart.so.13"]
    assert cudart["how"] == "already loaded" and cudart["distribution"] == "nvidia-cuda-runtime 13.5.37"
    assert children["sysbound"]["compared"] >= 2 and children["rpathpkg"]["compared"] >= 2
    # the text report says it in one line
    assert main(["doctor", "--env", str(python), "--confirm", "--confirm-only", "rpathpkg"]) == 0
    text = capsys.readouterr().out
    assert "confirmed by loading: 1 import in fresh children" in text and "disagrees on 0" in text
    argv = ["doctor", "--env", str(python), "--confirm", "--confirm-only", "rpathpkg", "--format", "markdown"]
    assert main(argv) == 0
    assert "- confirmed by loading: 1 import" in capsys.readouterr().out


def test_the_pairs_compared_name_the_runpath_and_preloaded_imports(preloading: tuple[Path, Path]) -> None:
    import os

    from cudaship.checks.confirm import compare, plan
    from cudaship.checks.environment import doctor_env
    from cudaship.oracle.observe import observe

    python, site = preloading
    report = doctor_env([str(python)], ld_library_path="")
    planned = plan(report.env)
    observation = observe(str(python), [p for _, p in planned], timeout=60, jobs=1)
    paths = {lib.path for lib in report.env.libraries} | {e.target for e in report.graph.edges if e.target}
    result = compare(
        report.env, report.graph, planned, observation, {p: os.path.realpath(p) for p in paths}, timeout=60
    )
    pairs = {(str(Path(i).relative_to(site)), n): v for i, n, v in result.pairs}
    assert pairs[(f"sysbound/_ext{EXT}", "libcudart.so.13")] is True  # preloaded by torch's import
    assert pairs[(f"rpathpkg/_rp{EXT}", "librp.so.1")] is True  # DT_RUNPATH
    assert result.disagree == 0


def test_a_disagreement_names_both_files_and_a_refused_import_is_an_error(
    capsys: pytest.CaptureFixture[str], one_process: tuple[Path, Path]
) -> None:
    _python, site = one_process
    code, doc = run_json(capsys, "--env", str(site), "--confirm", "--confirm-timeout", "5")
    assert code == 1
    # the simulation: one process, alpha first; beta's librp.so.1 is alpha's (shadowed)
    assert [f["file"] for f in doc["findings"] if f["rule"] == "shadowed"] == [str(site / f"beta/_rp{EXT}")]
    (dis,) = [f for f in doc["findings"] if f["rule"] == "loader-disagrees"]
    assert dis["severity"] == "warning" and dis["file"] == str(site / f"beta/_rp{EXT}")
    assert dis["target"] == str(site / "beta.libs" / "librp.so.1") and dis["library"] == "librp.so.1"
    assert (
        "alpha.libs/librp.so.1" in dis["message"]
        and "loader: beta.libs/librp.so.1 (beta 1.0)" in dis["message"]
    )
    (d,) = doc["confirm"]["disagreements"]
    assert d["static"] == str(site / "alpha.libs" / "librp.so.1") and d["module"] == "beta"
    failed = {f["distribution"]: f for f in doc["findings"] if f["rule"] == "import-failed"}
    assert set(failed) == {"gamma 1.0"}  # delta has no native code: not imported by default
    assert failed["gamma 1.0"]["severity"] == "error"
    assert "libgone.so.9: cannot open shared object file" in failed["gamma 1.0"]["message"]
    assert doc["confirm"]["disagree"] == 1
    # the children: the native distributions, and the pure one requiring one of them
    assert {c["module"] for c in doc["confirm"]["children"]} == {"alpha", "beta", "gamma", "epsilon"}


def test_a_hanging_import_is_killed_at_the_timeout(
    capsys: pytest.CaptureFixture[str], one_process: tuple[Path, Path]
) -> None:
    python, _site = one_process
    code, doc = run_json(
        capsys, "--env", str(python), "--confirm", "--confirm-only", "delta", "--confirm-timeout", "2"
    )
    (child,) = doc["confirm"]["children"]
    assert child["module"] == "delta" and child["timed_out"] and not child["ok"]
    (failed,) = [f for f in doc["findings"] if f["rule"] == "import-failed"]
    assert failed["severity"] == "warning" and "did not finish within 2 s" in failed["message"]
    assert code == 1  # gamma's unresolved import, from the simulation


def test_bad_usage(
    capsys: pytest.CaptureFixture[str], one_process: tuple[Path, Path], tmp_path: Path
) -> None:
    python, site = one_process
    assert main(["doctor", "--confirm"]) == 2
    assert main(["doctor", "--env", str(python), "--confirm", "--confirm-only", "nosuchdist"]) == 2
    assert "nosuchdist" in capsys.readouterr().err
    # a site-packages directory outside any virtual environment (one distribution in it: an empty one is
    # refused before, as holding nothing)
    bare = tmp_path / "site-packages"
    bare.mkdir()
    info = next(site.glob("*.dist-info"))
    shutil.copytree(info, bare / info.name)
    assert main(["doctor", "--env", str(bare), "--confirm"]) == 2
    assert "--confirm needs the environment's interpreter" in capsys.readouterr().err


def test_a_windows_environment_is_not_loaded_on_linux(
    capsys: pytest.CaptureFixture[str], torch_windows_cpu_env: Path
) -> None:
    assert main(["doctor", "--env", str(torch_windows_cpu_env), "--confirm"]) == 2
    assert "a windows environment cannot load on linux" in capsys.readouterr().err


@pytest.fixture(scope="module")
def identical_copies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """alpha and beta each ship the same librp.so.1 (byte for byte) through their DT_RUNPATH."""
    root = tmp_path_factory.mktemp("confirm-identical")
    _python, site = make_venv(root / "venv")
    build = root / "build"
    lib = shared_lib(build / "rp-lib", "librp.so.1", "rp_value", 7)
    for name in ("alpha", "beta"):
        ext = ext_module(
            build / name,
            "_rp",
            "int rp_value(void);",
            "rp_value()",
            f"-L{lib.parent}",
            "-l:librp.so.1",
            "-Wl,--enable-new-dtags",
            f"-Wl,-rpath,$ORIGIN/../{name}.libs",
        )
        files: dict[str, Path | str] = {f"{name}/__init__.py": "from . import _rp\n", f"{name}/_rp{EXT}": ext}
        files[f"{name}.libs/librp.so.1"] = lib
        dist(site, name, "1.0", files)
    return site


def test_a_disagreement_between_identical_files_is_a_note(
    capsys: pytest.CaptureFixture[str], identical_copies: Path
) -> None:
    site = identical_copies
    code, doc = run_json(capsys, "--env", str(site), "--confirm", "--confirm-timeout", "30")
    assert code == 0
    assert not [f for f in doc["findings"] if f["rule"] in ("loader-disagrees", "shadowed")]
    (same,) = [f for f in doc["findings"] if f["rule"] == "loader-identical"]
    assert same["severity"] == "note" and same["file"] == str(site / f"beta/_rp{EXT}")
    assert same["target"] == str(site / "beta.libs" / "librp.so.1")
    assert "identical (same size and sha256)" in same["message"]
    assert doc["confirm"]["disagree"] == 1  # still counted: the loader did map the other file
