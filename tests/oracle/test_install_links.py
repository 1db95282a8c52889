"""``audit --load --load-python``: the wheel alone is layered on an existing environment with ``pip install
--no-deps --target``, where wheel-axle-runtime's ``.pth`` never runs; the oracle makes the links of
``.dist-info/symlinks.txt`` itself, as a real install does (knowledge/data/install_conventions.toml), so a
library that needs a link's name loads as it does for every user (issue 32, class 6; holoscan-cu12)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from cudaship.cli.main import main
from cudaship.knowledge.install_conventions import link_convention
from cudaship.oracle.install import make_install_links
from cudaship.wheel.metadata import SYMLINKS_FILE
from tests.oracle.builders import build_so, build_wheel, function, needs_gcc


def _axle_wheel(tmp_path: Path) -> Path:
    """axlepkg: ``lib/libcore.so.4.6.0`` (SONAME libcore.so.4) shipped under its full version only; the
    SONAME link comes from symlinks.txt (a ``.data/purelib`` path, as holoscan-cu12 writes them), and a
    directory link ``lib64 -> lib``. ``_ext.so`` needs libcore.so.4 through RUNPATH ``$ORIGIN/lib64``."""
    b = tmp_path / "build"
    core = build_so(b / "libcore.so.4", function("core_fn"), soname="libcore.so.4")
    ext = build_so(b / "_ext.so", function("ext_fn", ["core_fn"]), link=[core], runpath=["$ORIGIN/lib64"])
    links = "axlepkg-1.0.data/purelib/axlepkg/lib/libcore.so.4,libcore.so.4.6.0,0\r\naxlepkg/lib64,lib,1\r\n"
    files: dict[str, bytes | Path] = {
        "axlepkg/__init__.py": b"",
        "axlepkg/_ext.so": ext,
        "axlepkg/lib/libcore.so.4.6.0": core,
        f"axlepkg-1.0.dist-info/{SYMLINKS_FILE}": links.encode(),
    }
    return build_wheel(tmp_path / "dist", "axlepkg", "1.0", files, top_level=["axlepkg"])


def _layered_audit(wheel: Path, python: str, out: Path, *more: str) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDASHIP_OFFLINE", "1")
        mp.delenv("GITHUB_ACTIONS", raising=False)
        main(
            [
                *("audit", "--no-progress", "--load", "--load-python", python, "--offline"),
                *("--load-timeout", "60", "-f", "json", "-o", str(out), *more, str(wheel)),
            ]
        )
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_the_convention_names_the_file_the_reader_reads() -> None:
    convention = link_convention(SYMLINKS_FILE)
    assert convention is not None and convention.runtime == "wheel-axle-runtime"
    assert "wheel-axle-runtime" in convention.source and "_symlinks.py" in convention.source


@needs_gcc
def test_make_install_links_makes_what_the_runtime_makes(tmp_path: Path) -> None:
    wheel = _axle_wheel(tmp_path)
    site = tmp_path / "site"
    (site / "axlepkg" / "lib").mkdir(parents=True)
    (site / "axlepkg" / "lib" / "libcore.so.4.6.0").write_bytes(b"x")
    note = make_install_links(str(wheel), site)
    assert note is not None and note.startswith("2 of 2 links of axlepkg-1.0.dist-info/symlinks.txt made")
    assert os.readlink(site / "axlepkg/lib/libcore.so.4") == "libcore.so.4.6.0"
    assert os.readlink(site / "axlepkg/lib64") == "lib"
    assert (site / "axlepkg/lib64/libcore.so.4").read_bytes() == b"x"


@needs_gcc
def test_a_link_leaving_the_install_directory_is_not_made(tmp_path: Path) -> None:
    files: dict[str, bytes | Path] = {
        "evil/__init__.py": b"",
        f"evil-1.0.dist-info/{SYMLINKS_FILE}": b"evil/passwd,../../../../etc/passwd,0\n",
    }
    wheel = build_wheel(tmp_path / "dist", "evil", "1.0", files, top_level=["evil"])
    site = tmp_path / "site"
    (site / "evil").mkdir(parents=True)
    note = make_install_links(str(wheel), site)
    assert note is not None and "0 of 1 link of" in note and "1 left out" in note
    assert not os.path.lexists(site / "evil/passwd")


@needs_gcc
def test_layered_install_has_the_install_time_links(tmp_path: Path) -> None:
    """Before the fix: ``axlepkg/_ext.so does not load: libcore.so.4: cannot open shared object file``
    (an error the static audit, which knows the links, does not share)."""
    data = _layered_audit(_axle_wheel(tmp_path), sys.executable, tmp_path / "a.json")
    load = data["wheels"][0]["load"]
    failing = [c for c in data["checks"] if c["family"] == "load" and c["status"] == "fail"]
    assert not [c for c in failing if c["severity"] == "error"], failing
    assert load["libraries"] == load["libraries_agree"] >= 2, load
    assert any("links of axlepkg-1.0.dist-info/symlinks.txt made in the layer" in n for n in load["notes"]), (
        load
    )


# --- the environment's site directories, reachable from the layer


@needs_gcc
def test_a_runpath_into_another_distribution_reaches_it_from_the_layer(tmp_path: Path) -> None:
    """A module whose RUNPATH leaves its own directory for another distribution's (``$ORIGIN/../deppkg/lib``;
    in a namespace, ``$ORIGIN/../dep/lib`` under ``nvx/``, as ``nvidia/`` is shared) loads after a real pip
    install. Before: in the ``--target`` layer that path named a directory of the layer, and the module did
    not load ("libdep.so: cannot open shared object file"), a load error no user meets (seen on
    pennylane-lightning-gpu 0.45.0 layered on an environment holding its NVIDIA requirements)."""
    import subprocess
    import venv

    b = tmp_path / "build"
    dep = build_so(b / "libdep.so", function("dep_fn"), soname="libdep.so")
    nsdep = build_so(b / "libnsdep.so", function("nsdep_fn"), soname="libnsdep.so")
    dep_wheel = build_wheel(
        tmp_path / "dist",
        "deppkg",
        "1.0",
        {"deppkg/__init__.py": b"", "deppkg/lib/libdep.so": dep, "nvx/dep/lib/libnsdep.so": nsdep},
    )
    ext = build_so(
        b / "_ext.so", function("ext_fn", ["dep_fn"]), link=[dep], runpath=["$ORIGIN/../deppkg/lib"]
    )
    nsext = build_so(
        b / "_nsext.so", function("nsext_fn", ["nsdep_fn"]), link=[nsdep], runpath=["$ORIGIN/../dep/lib"]
    )
    files: dict[str, bytes | Path] = {
        "mainpkg/__init__.py": b"",
        "mainpkg/_ext.so": ext,
        "nvx/main/__init__.py": b"",
        "nvx/main/_nsext.so": nsext,
    }
    wheel = build_wheel(
        tmp_path / "dist", "mainpkg", "1.0", files, requires=["deppkg"], top_level=["mainpkg", "nvx"]
    )

    env = tmp_path / "env"
    venv.create(env, with_pip=True)
    python = str(env / "bin" / "python")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(dep_wheel)],
        check=True,
        timeout=300,
    )
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig;print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    before = sorted(p.relative_to(env) for p in env.rglob("*"))

    # the static side reads deppkg's files from its wheel (--find-links), so the two sides can agree
    data = _layered_audit(wheel, python, tmp_path / "a.json", "--find-links", str(dep_wheel.parent))
    load = data["wheels"][0]["load"]
    failing = [c for c in data["checks"] if c["family"] == "load" and c["status"] == "fail"]
    assert not [c for c in failing if c["severity"] == "error"], failing
    assert load["libraries"] == load["libraries_agree"] == 2, load
    (note,) = [n for n in load["notes"] if "of the environment linked into the layer" in n]
    assert "deppkg" in note and "nvx/dep" in note
    # the environment is as it was: nothing written in it, nothing removed through a link
    assert sorted(p.relative_to(env) for p in env.rglob("*")) == before
    assert (site / "deppkg/lib/libdep.so").read_bytes() == dep.read_bytes()


def test_link_environment_links_what_the_layer_lacks_and_merges_namespaces_only(tmp_path: Path) -> None:
    from cudaship.oracle.install import link_environment

    site, layer = tmp_path / "site", tmp_path / "layer"
    for d in ("torch/lib", "nvidia/cublas/lib", "nvidia/cu13/lib", "own/old", "numpy.libs", "__pycache__"):
        (site / d).mkdir(parents=True)
    (site / "torch-2.0.dist-info").mkdir()
    (site / "six.py").write_text("")
    (site / "own/__init__.py").write_text("")
    for d in ("own", "nvidia/mine/lib"):
        (layer / d).mkdir(parents=True)
    (layer / "own/__init__.py").write_text("")
    note = link_environment(layer, [str(site), str(layer)])
    links = sorted(str(p.relative_to(layer)) for p in layer.rglob("*") if p.is_symlink())
    assert links == ["numpy.libs", "nvidia/cu13", "nvidia/cublas", "torch"]
    assert os.readlink(layer / "torch") == str(site / "torch")
    assert not (layer / "own/old").exists()  # a regular package of the wheel keeps only its own files
    assert note is not None and note.startswith("4 directories of the environment linked into the layer (")
    assert link_environment(tmp_path / "empty-layer", [str(tmp_path / "nowhere")]) is None
