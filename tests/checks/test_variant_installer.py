"""A real installer that implements wheel variants (uv from PyPI, ``--preview-features wheel-variants``, with
its built-in NVIDIA provider) installs an honest and a lying variant set from a local index on 127.0.0.1, the
provider's override variables forcing the GPU and the driver; cudaship's "which variant here" answer (``gpus
--gpu X --driver Y``, ``variant release --here``) names the same variant, and says whether it runs.

uv 0.13.9 refuses a provider with ``enable-if`` ("data did not match any variant of untagged enum
ProviderKind"), which ``cudaship variant make`` and the NVIDIA provider's README write: the variant.json here
leaves it out (docs/variants.md says what was found).
Skipped when uv cannot be downloaded from PyPI."""

from __future__ import annotations

import functools
import html
import json
import os
import shutil
import subprocess
import threading
import zipfile
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import tests.fixtures.variant_wheels as variant_wheels
from cudaship.cli.main import main
from tests.fixtures.wheels import RealWheel, fetch

pytestmark = pytest.mark.slow

UV = RealWheel("uv", "0.13.9", "manylinux_2_17_x86_64")
FORCE_SM = "NV_VARIANT_PROVIDER_FORCE_SM_ARCH"
FORCE_CUDA = "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION"

HONEST = {
    "cuda_version_lower_bound": ["13.0"],
    "cuda_version_upper_bound": ["14"],
    "sm_arch": ["80_real", "86_real", "89_real", "90_real", "100_real", "120_real", "120_virtual"],
}
#: says a CUDA 12.0 driver will do; the wheel links the CUDA 13 runtime
LYING = {**HONEST, "cuda_version_lower_bound": ["12.0"], "cuda_version_upper_bound": ["13"]}


_DOCUMENT = variant_wheels.variant_document


def _document(label: str, properties: dict[str, dict[str, list[str]]] | None) -> dict[str, Any]:
    """The suite's variant.json (schema v0.0.3, as variantlib and cudaship write it) without ``enable-if``."""
    doc = _DOCUMENT(label, properties)
    doc["providers"]["nvidia"] = {k: v for k, v in doc["providers"]["nvidia"].items() if k != "enable-if"}
    return doc


@pytest.fixture(scope="module")
def uv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wheel = fetch(UV)  # skips without PyPI
    target = tmp_path_factory.mktemp("uv") / "uv"
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".data/scripts/uv"))
        target.write_bytes(zf.read(name))
    target.chmod(0o755)
    return target


def _serve(root: Path) -> Iterator[str]:
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def _index(root: Path, wheels: list[Path], variants: dict[str, Any]) -> Path:
    """A PEP 503 index: /simple/executorch/ linking the wheels and the release's ``*-variants.json``."""
    page = root / "simple" / "executorch"
    page.mkdir(parents=True)
    files = [*wheels]
    index_json = page / "executorch-1.6.0+cu130-variants.json"
    index_json.write_text(json.dumps(variants))
    for w in wheels:
        shutil.copy(w, page / w.name)
    links = [f'<a href="{html.escape(p.name)}">{html.escape(p.name)}</a>' for p in [*files, index_json]]
    (page / "index.html").write_text("<html><body>" + "".join(links) + "</body></html>")
    return index_json


@pytest.fixture
def made(
    synthetic_wheel: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str, dict[str, list[str]]], tuple[list[Path], Iterator[str], Path]]:
    linux = synthetic_wheel("linux")
    monkeypatch.setattr(variant_wheels, "variant_document", _document)

    def make(label: str, props: dict[str, list[str]]) -> tuple[list[Path], Iterator[str], Path]:
        out = tmp_path / label
        wheels = [
            variant_wheels.make_variant(linux, out / "w", label, {"nvidia": props}),
            variant_wheels.make_variant(linux, out / "w", "null", None),
        ]
        doc = _document(label, {"nvidia": props})
        doc["variants"]["null"] = {}
        index_json = _index(out / "root", wheels, doc)
        return wheels, _serve(out / "root"), index_json

    return make


def _uv_pick(uv: Path, url: str, target: Path, gpu: str, cuda: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(target.parent),
        "UV_CACHE_DIR": str(target.parent / "uv-cache"),
        "UV_NO_CONFIG": "1",
        FORCE_SM: gpu,
        FORCE_CUDA: cuda,
    }
    done = subprocess.run(
        [
            str(uv), "pip", "install", "--quiet", "--preview-features", "wheel-variants",
            "--index-url", url, "--no-deps", "--target", str(target),
            "--python-version", "3.12", "--python-platform", "x86_64-manylinux_2_28",
            "executorch==1.6.0+cu130",
        ],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    installed = json.loads(next(target.glob("*.dist-info/variant.json")).read_text())
    (label,) = installed["variants"]
    return str(label)


def _cudaship_pick(
    capsys: pytest.CaptureFixture[str], wheels: list[Path], index_json: Path, gpu: str, cuda: str
) -> tuple[str, bool | None]:
    argv = ["gpus", "-f", "json", *map(str, wheels), str(index_json), "--gpu", gpu, "--driver", cuda]
    assert main(argv) in (0, 1)
    ((pick,),) = [r["picks"] for r in json.loads(capsys.readouterr().out)["variant_releases"]]
    return pick["variant"], pick["runs"]


MACHINES = [("9.0", "13.0"), ("9.0", "12.8"), ("12.0", "13.1"), ("7.5", "13.0")]


@pytest.mark.parametrize("which", ["honest", "lying"])
def test_uv_installs_the_variant_cudaship_names(
    which: str,
    uv: Path,
    made: Callable[[str, dict[str, list[str]]], tuple[list[Path], Iterator[str], Path]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    label, props = ("cu13", HONEST) if which == "honest" else ("cu12", LYING)
    wheels, server, index_json = made(label, props)
    url = next(server)
    try:
        answers = {}
        for n, (gpu, cuda) in enumerate(MACHINES):
            installed = _uv_pick(uv, url, tmp_path / f"t{n}", gpu, cuda)
            mine, runs = _cudaship_pick(capsys, wheels, index_json, gpu, cuda)
            assert installed == mine, (gpu, cuda)
            answers[(gpu, cuda)] = (mine, runs)
            # variant release --here honours the same variables
            monkeypatch.setenv(FORCE_SM, gpu)
            monkeypatch.setenv(FORCE_CUDA, cuda)
            main(["variant", "release", *map(str, wheels), "--here", "-f", "json"])
            assert json.loads(capsys.readouterr().out)["picks"][0]["variant"] == installed
    finally:
        next(server, None)
    if which == "honest":
        assert answers == {
            ("9.0", "13.0"): ("cu13", True),
            ("9.0", "12.8"): ("null", None),
            ("12.0", "13.1"): ("cu13", True),
            ("7.5", "13.0"): ("null", None),
        }
    else:  # uv installs the liar on a CUDA 12.8 driver, where cudaship says it cannot run
        assert answers[("9.0", "12.8")] == ("cu12", False)
        assert answers[("9.0", "13.0")] == ("null", None)  # its upper bound 13 excludes a 13.0 driver
