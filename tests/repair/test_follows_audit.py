"""repair follows the audit's classification (issue 32, class 10), on the real wheels the issue names.

The audit passes bitsandbytes (its CUDA libraries are variants, one per CUDA version, met by the user's torch)
and cupy-cuda12x (cuBLAS, NVRTC, cuFFT, ... come with its ``[ctk]`` extra; NCCL and cuTENSOR only with the
features that load them). repair once added every NVIDIA wheel at once (cu11, cu12 and cu13 of cuBLAS and
the runtime for bitsandbytes; seven unconditional requirements and, on Windows, three
``os.add_dll_directory`` bootstraps for cupy). Now: required -> requirement; extra -> the extra, named in a
note; host, variant or preloaded -> left alone, with a note; and the audit's JSON ``imports[].met`` says the
same for every library repair leaves alone."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from cudaship.cli.main import main
from tests.repair.test_repair_cuda_extension import SCHEMA


def _plan(wheel: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["repair", "--dry-run", str(wheel), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, SCHEMA)
    (result,) = doc["wheels"]
    plan: dict[str, object] = result["plan"]
    return plan


def _met(wheel: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, set[str]]:
    """Library name -> how the audit judges it met (over every importer)."""
    code = main(["audit", str(wheel), "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    out: dict[str, set[str]] = {}
    for imp in doc["wheels"][0]["imports"]:
        out.setdefault(imp["library"], set()).add(imp["met"])
    return out


def test_bitsandbytes_variants_get_no_requirement(
    bitsandbytes_linux_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _plan(bitsandbytes_linux_wheel, capsys)
    assert plan["requirements"] == []
    notes = "\n".join(plan["notes"])  # type: ignore[arg-type]
    for name in ("libcublas.so.11", "libcudart.so.12", "libcublasLt.so.13"):
        assert name in notes
    assert "variants for other environments" in notes
    met = _met(bitsandbytes_linux_wheel, capsys)
    assert met["libcublas.so.11"] == {"variant"} and met["libcudart.so.12"] == {"variant"}
    assert met["libcudart.so.13"] == {"preloaded"}


def test_bitsandbytes_print_excludes_covers_each_variants_major(
    bitsandbytes_linux_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repair", "--print-excludes", "auditwheel", str(bitsandbytes_linux_wheel)]) == 0
    flags = capsys.readouterr().out.split()
    for name in ("libcudart.so.11.0", "libcudart.so.12", "libcudart.so.13"):
        assert name in flags


@pytest.mark.parametrize("fixture", ["cupy_linux_wheel", "cupy_windows_wheel"])
def test_cupy_extra_is_named_not_required(
    fixture: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel: Path = request.getfixturevalue(fixture)
    plan = _plan(wheel, capsys)
    assert plan["requirements"] == []
    assert plan["bootstraps"] == []
    notes = "\n".join(plan["notes"])  # type: ignore[arg-type]
    assert "cupy-cuda12x[ctk]" in notes
    met = _met(wheel, capsys)
    cublas = "libcublas.so.12" if fixture == "cupy_linux_wheel" else "cublas64_12.dll"
    assert met[cublas] == {"extra"}


_ALONE = {"extra", "host", "variant", "preloaded"}


@pytest.mark.parametrize(
    "fixture",
    [
        "bitsandbytes_linux_wheel",
        "cupy_linux_wheel",
        "cupy_windows_wheel",
        "onnxruntime_linux_wheel",
        "onnxruntime_windows_wheel",
        "ctranslate2_vendoring_wheel",
        "cumm_vendoring_wheel",
    ],
)
def test_repair_adds_no_requirement_for_what_the_audit_calls_optional(
    fixture: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same wheel gets the same answer: no library repair adds a requirement for is one the audit judges
    met by an extra, a host, a variant or preloading (and every library repair leaves alone with a note is one
    the audit does not judge missing)."""
    wheel: Path = request.getfixturevalue(fixture)
    plan = _plan(wheel, capsys)
    main(["audit", str(wheel), "-f", "json"])
    imports = json.loads(capsys.readouterr().out)["wheels"][0]["imports"]
    met: dict[str, set[str]] = {}
    for imp in imports:
        met.setdefault(imp["library"].lower(), set()).add(imp["met"])
    for added in plan["requirements"]:  # type: ignore[attr-defined]
        for library in added["libraries"]:
            assert not (met.get(library.lower(), set()) and met[library.lower()] <= _ALONE), (
                added,
                met[library.lower()],
            )
    notes = "\n".join(plan["notes"])  # type: ignore[arg-type]
    for library, how in met.items():
        if how == {"missing"}:
            assert f"{library}," not in notes.lower() and not notes.lower().endswith(library), library
