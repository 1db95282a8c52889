"""``cudaship gpus``: verdicts per library, per wheel and overall, in every format, on real binaries."""

from __future__ import annotations

import json
from collections.abc import Callable
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import jsonschema
import pytest

from cudaship.cli.main import main
from cudaship.inspection.walk import inspect_paths
from cudaship.knowledge.gpus import default_capabilities
from cudaship.knowledge.runs_on import runs_on

RANK = {"native": 0, "jit": 1, "no": 2}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def schema() -> dict[str, Any]:
    text = resources.files("cudaship.render").joinpath("schemas").joinpath("gpus.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def gpus_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(capsys, "gpus", "--format", "json", *argv)
    doc: dict[str, Any] = json.loads(out)
    jsonschema.validate(doc, schema())
    return code, doc


@pytest.fixture(scope="module")
def libs(nvcc_build: Callable[[str], Path]) -> list[Path]:
    return [nvcc_build(n) for n in ("multi_arch", "arch_specific", "family_specific", "ptx_only")]


def test_json_follows_the_rule_per_file_and_overall(
    capsys: pytest.CaptureFixture[str], libs: list[Path]
) -> None:
    code, doc = gpus_json(capsys, *map(str, libs))
    assert code == 0
    caps = [c["capability"] for c in doc["capabilities"]]
    # x86_64 libraries: the x86_64 GPUs (7.0 to 12.0), never Jetson Orin 8.7, Thor 11.0 nor GB10 12.1
    assert caps == [a.capability for a in default_capabilities(["x86_64"])]
    assert caps[0] == "7.0" and caps[-1] == "12.0" and not {"8.7", "11.0", "12.1"} & set(caps)
    inspected = inspect_paths([str(p) for p in libs])
    assert [f["path"] for f in doc["files"]] == [f.path for f in inspected.files]
    for report, shown in zip(inspected.files, doc["files"], strict=True):
        for cap in caps:
            expected = runs_on(report.device_code, cap)
            got = shown["verdicts"][cap]
            assert (got["verdict"], got["reason"], got["min_driver"]) == (
                expected.verdict.value,
                expected.reason,
                expected.min_driver,
            )
    for cap in caps:
        worst = max((f["verdicts"][cap]["verdict"] for f in doc["files"]), key=RANK.__getitem__)
        assert doc["overall"]["verdicts"][cap]["verdict"] == worst
    assert doc["overall"]["min_driver"] == "580.65.06"  # nvcc 13.0 output: the CUDA 13 floor


def test_driver_too_old_for_the_cuda_major(capsys: pytest.CaptureFixture[str], libs: list[Path]) -> None:
    _, served = gpus_json(capsys, str(libs[0]))
    code, doc = gpus_json(capsys, "--driver", "560.28.03", str(libs[0]))
    assert code == 0
    assert doc["driver"] == {"version": "560.28.03", "cuda": "12.6"}
    for cap, verdict in doc["files"][0]["verdicts"].items():
        assert verdict["verdict"] == "no"
        if served["files"][0]["verdicts"][cap]["verdict"] != "no":  # code for that GPU: the driver is why
            assert "newer CUDA major" in verdict["reason"]


def test_gpu_selection_by_name_and_capability(capsys: pytest.CaptureFixture[str], libs: list[Path]) -> None:
    _, doc = gpus_json(capsys, "--gpu", "A10G,H200", "--gpu", "12.1", str(libs[1]))
    assert list(doc["files"][0]["verdicts"]) == ["8.6", "9.0", "12.1"]
    verdicts = doc["files"][0]["verdicts"]
    assert verdicts["9.0"]["entry"] == "sm_90a"
    assert verdicts["8.6"]["verdict"] == "no"


@pytest.mark.network
def test_real_wheel_as_a_whole(capsys: pytest.CaptureFixture[str], bitsandbytes_linux_wheel: Path) -> None:
    code, doc = gpus_json(capsys, str(bitsandbytes_linux_wheel))
    assert code == 0
    assert [w["path"] for w in doc["wheels"]] == [str(bitsandbytes_linux_wheel)]
    wheel = doc["wheels"][0]
    carrying = [f for f in doc["files"] if f["device_code"]]
    assert len(carrying) == len(wheel["files"]) >= 2
    assert all(f["container"] == str(bitsandbytes_linux_wheel) for f in doc["files"])
    # libbitsandbytes_cuda118.so ... _cuda132.so are variants, one loaded: the wheel runs on a GPU where the
    # best of them does (issue 12: the RTX 5090 runs bitsandbytes through its newest variants)
    for cap, verdict in wheel["verdicts"].items():
        best = min((f["verdicts"][cap]["verdict"] for f in carrying), key=RANK.__getitem__)
        assert verdict["verdict"] == best, cap
        if best != "native":
            assert verdict["file"] is not None
    assert wheel["verdicts"]["12.0"]["verdict"] == "native"
    assert "cuda128, cuda130, cuda132" in wheel["verdicts"]["12.0"]["reason"]
    (group,) = wheel["variants"]
    assert group["group"] == "bitsandbytes/libbitsandbytes_*.so"
    served = {v["name"]: v for v in group["variants"]}
    assert "12.0" not in served["cuda118"]["serves"] and "12.0" in served["cuda132"]["serves"]
    assert served["cuda118"]["build_cuda"] == "11.8" and served["cuda118"]["min_driver"]
    assert wheel["verdicts"] == doc["overall"]["verdicts"]
    assert any(f["build_cuda"] for f in carrying)


@pytest.mark.network
def test_windows_wheel_uses_windows_platform(
    capsys: pytest.CaptureFixture[str], bitsandbytes_windows_wheel: Path
) -> None:
    _, doc = gpus_json(capsys, str(bitsandbytes_windows_wheel))
    carrying = [f for f in doc["files"] if f["device_code"]]
    assert carrying and all(f["platform"] == "windows" for f in carrying)


def test_text_report(capsys: pytest.CaptureFixture[str], libs: list[Path]) -> None:
    code, out, _ = run(capsys, "gpus", str(libs[0]), str(libs[2]))
    assert code == 0
    assert "all inputs: 2 libraries with device code" in out
    assert "9.0 Hopper (H100, H200)" in out
    assert "minimum driver: 580.65.06" in out
    assert libs[2].name in out and "N native SASS" in out


class _Checker(HTMLParser):
    VOID: ClassVar[frozenset[str]] = frozenset({"meta", "br", "link", "img", "input", "hr"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.cells: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, _ in attrs:
            assert name not in ("src", "href"), "the page must be self-contained"
        if tag == "td":
            found = dict(attrs)
            if found.get("class") in ("native", "jit", "no"):
                self.cells.append((found["class"] or "", found.get("title") or ""))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1:]}>"
        self.stack.pop()


def test_html_heatmap(capsys: pytest.CaptureFixture[str], libs: list[Path], tmp_path: Path) -> None:
    page = tmp_path / "gpus.html"
    code, out, _ = run(capsys, "gpus", "--format", "html", "-o", str(page), *map(str, libs))
    assert (code, out) == (0, "")
    text = page.read_text()
    checker = _Checker()
    checker.feed(text)
    checker.close()
    assert checker.stack == []
    assert "script" not in checker.tags
    rows = 1 + len(libs)  # the "all inputs" row and one per library
    assert len(checker.cells) == rows * len(default_capabilities(["x86_64"]))
    assert {c for c, _ in checker.cells} == {"native", "jit", "no"}
    assert all(title for _, title in checker.cells)
    for lib in libs:
        assert lib.name in text


def test_markdown(capsys: pytest.CaptureFixture[str], libs: list[Path]) -> None:
    code, out, _ = run(capsys, "gpus", "--format", "markdown", str(libs[3]))
    assert code == 0
    assert out.startswith("## cudaship gpus")
    assert "| 8.6 Ampere (A10G, A10) | 🟡 jit |" in out
    assert "| 7.5 Turing (T4, RTX 2080 Ti) | 🔴 no |" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--driver", "newest", "x.so"], "--driver: invalid driver 'newest'"),
        (["--gpu", "Voodoo", "x.so"], "--gpu: unknown GPU 'Voodoo'"),
    ],
    ids=["bad-driver", "bad-gpu"],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, "gpus", *argv)
    assert (code, out) == (2, "")
    assert err.startswith(f"cudaship: error: {message}") and err.count("\n") == 1


def test_unreadable_input_is_reported_and_exit_2(
    capsys: pytest.CaptureFixture[str], libs: list[Path], tmp_path: Path
) -> None:
    broken = tmp_path / "libbroken.so"
    broken.write_bytes(libs[0].read_bytes()[:2000])
    code, doc = gpus_json(capsys, str(libs[0]), str(broken), str(tmp_path / "missing.so"))
    assert code == 2
    errors = [f for f in doc["files"] if f["error"]]
    assert len(errors) == 2
    assert doc["files"][0]["device_code"] is True


@pytest.mark.network
def test_details_read_the_toolkit_of_each_cubin(
    capsys: pytest.CaptureFixture[str], bitsandbytes_linux_wheel: Path
) -> None:
    """Without --details the CUDA release comes from PTX ISA (8.5 is 12.5 or 12.6); cubin notes say which."""
    _, plain = gpus_json(capsys, str(bitsandbytes_linux_wheel))
    _, detailed = gpus_json(capsys, "--details", str(bitsandbytes_linux_wheel))
    for before, after in zip(plain["files"], detailed["files"], strict=True):
        if not after["device_code"]:
            continue
        tag = before["path"].rsplit("cuda", 1)[-1].split(".")[0]  # libbitsandbytes_cuda126.so -> "126"
        assert after["build_cuda"] == f"{tag[:-1]}.{tag[-1]}"
        assert before["build_cuda"] <= after["build_cuda"]
