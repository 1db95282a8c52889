"""The GitHub Action: schema-valid, and its shell steps run locally with a fake GITHUB_* environment."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from cudaship.ci import action_steps

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = Path(__file__).parent / "schemas"
ACTION = ROOT / "action.yml"
WORKFLOW = ROOT / "docs" / "examples" / "workflows" / "release.yml"
STEPS_SCRIPT = ROOT / "src" / "cudaship" / "ci" / "action_steps.py"


def load_yaml(path: Path) -> Any:
    # GitHub's YAML keeps `on` a string; PyYAML's YAML 1.1 turns the bare key into True.
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and True in data:
        data["on"] = data.pop(True)
    return data


@pytest.mark.parametrize(
    ("path", "schema"),
    [
        pytest.param(ACTION, "github-actions.json", id="action.yml"),
        pytest.param(WORKFLOW, "github-workflows.json", id="example-workflow"),
    ],
)
def test_valid_against_published_schema(path: Path, schema: str) -> None:
    validator = jsonschema.Draft7Validator(json.loads((SCHEMAS / schema).read_text(encoding="utf-8")))
    errors = sorted(validator.iter_errors(load_yaml(path)), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_schema_rejects_a_broken_action() -> None:
    validator = jsonschema.Draft7Validator(json.loads((SCHEMAS / "github-actions.json").read_text()))
    broken = load_yaml(ACTION)
    broken["runs"]["steps"][0].pop("shell")  # a composite run step must name its shell
    assert list(validator.iter_errors(broken))


def test_example_workflow_uses_the_action_and_commands() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    for needle in ("cudaship matrix", "--derive e2e", "cudaship env", "uses: ./", "fromJSON"):
        assert needle in text
    assert not (ROOT / ".github" / "workflows" / "release.yml").exists()


# ------------------------------------------------------------------------------------------ fake GitHub


class FakeGitHub:
    """A workspace and the files GitHub hands a step: GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_ENV."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workspace = root / "workspace"
        self.workspace.mkdir()
        self.summary = root / "summary.md"
        self.outputs: dict[str, Path] = {}
        self.summary.write_text("")

    def env(self, step: str, extra: Mapping[str, str]) -> dict[str, str]:
        output = self.root / f"output-{step}.txt"
        output.write_text("")
        self.outputs[step] = output
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "CUDASHIP"))}
        environ.update(
            {
                "GITHUB_ACTIONS": "true",
                "GITHUB_WORKSPACE": str(self.workspace),
                "GITHUB_OUTPUT": str(output),
                "GITHUB_STEP_SUMMARY": str(self.summary),
                "GITHUB_ENV": str(self.root / "env.txt"),
                "RUNNER_TEMP": str(self.root / "runner-temp"),
                "RUNNER_OS": "Linux",
            }
        )
        environ.update(extra)
        return environ

    def output(self, step: str) -> dict[str, str]:
        lines = self.outputs[step].read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)


def stand_in_cudaship(tmp: Path, exit_code: int) -> str:
    """A stand-in for the cudaship command, to choose audit's exit code: writes its -o file and every
    ``--report FORMAT=FILE``, exits as told."""
    script = tmp / "stand_in.py"
    script.write_text(
        "import sys, pathlib\n"
        "args = sys.argv[1:]\n"
        "out = pathlib.Path(args[args.index('-o') + 1])\n"
        "fmt = args[args.index('--format') + 1]\n"
        "wheels = [a for a in args if a.endswith('.whl')]\n"
        "names = '\\n'.join(f'- {pathlib.Path(w).name}' for w in wheels)\n"
        "out.write_text(f'## {args[0]} {fmt}\\n\\n' + names)\n"
        "for i, a in enumerate(args):\n"
        "    if a == '--report':\n"
        "        extra_fmt, _, extra = args[i + 1].partition('=')\n"
        "        pathlib.Path(extra).write_text(f'## {args[0]} {extra_fmt}\\n\\n' + names)\n"
        "with open(out.parent / 'calls.txt', 'a') as f: f.write(' '.join(args) + '\\n')\n"
        f"sys.exit({exit_code} if args[0] == 'audit' else 0)\n"
    )
    return f"{sys.executable} {script}"


def make_wheel(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("demo/__init__.py", "")
    return path


@pytest.mark.parametrize(
    ("audit_exit", "fail_on_findings", "result", "gate_exit"),
    [
        pytest.param(0, "true", "passed", 0, id="passed"),
        pytest.param(1, "true", "failed", 1, id="failed-checks-fail-job"),
        pytest.param(1, "false", "failed", 0, id="failed-checks-allowed"),
        pytest.param(2, "false", "error", 2, id="bad-input-always-fails"),
    ],
)
def test_audit_and_gate_steps(
    tmp_path: Path, audit_exit: int, fail_on_findings: str, result: str, gate_exit: int
) -> None:
    gh = FakeGitHub(tmp_path)
    make_wheel(gh.workspace / "dist", "demo-1.0+cu132-cp312-cp312-linux_x86_64.whl")
    make_wheel(gh.workspace / "dist", "demo-1.0+cu132-cp312-cp312-win_amd64.whl")
    environ = gh.env(
        "audit",
        {
            "CUDASHIP": stand_in_cudaship(tmp_path, audit_exit),
            "INPUT_WHEELS": "dist/*.whl",
            "INPUT_POLICY": "pyproject.toml",
        },
    )
    proc = subprocess.run(
        [sys.executable, str(STEPS_SCRIPT), "audit"], env=environ, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = gh.output("audit")
    assert out["exit-code"] == str(audit_exit)
    assert out["result"] == result
    reports = Path(out["report-dir"])
    assert reports == gh.workspace / "cudaship-reports"
    assert {p.name for p in reports.iterdir()} >= {"audit.md", "audit.junit.xml", "audit.json", "gpus.html"}
    summary = gh.summary.read_text()
    assert summary.startswith("## audit markdown")
    assert "win_amd64.whl" in summary
    calls = (reports / "calls.txt").read_text().splitlines()
    # one audit run writes the three reports (the wheel is read once, each failure annotated once)
    assert [c.split()[0] for c in calls] == ["audit", "gpus"]
    assert "--policy pyproject.toml" in calls[0]
    assert "--report junit=" in calls[0] and "--report json=" in calls[0]

    gate_env = gh.env(
        "gate", {"AUDIT_EXIT_CODE": out["exit-code"], "INPUT_FAIL_ON_FINDINGS": fail_on_findings}
    )
    gate = subprocess.run(
        [sys.executable, str(STEPS_SCRIPT), "gate"], env=gate_env, capture_output=True, text=True, check=False
    )
    assert gate.returncode == gate_exit
    if gate_exit:
        assert "::error title=cudaship::" in gate.stdout


@pytest.mark.network
def test_audit_step_with_real_cudaship(tmp_path: Path, bitsandbytes_linux_wheel: Path) -> None:
    """The real `cudaship audit` and `cudaship gpus` on a real PyPI wheel, through the Action's steps."""
    import shutil
    import xml.etree.ElementTree as ET

    gh = FakeGitHub(tmp_path)
    (gh.workspace / "dist").mkdir()
    shutil.copy(bitsandbytes_linux_wheel, gh.workspace / "dist")
    environ = gh.env("audit", {"CUDASHIP": f"{sys.executable} -m cudaship", "INPUT_WHEELS": "dist/*.whl"})
    proc = subprocess.run(
        [sys.executable, str(STEPS_SCRIPT), "audit"],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = gh.output("audit")
    reports = Path(out["report-dir"])
    failed = json.loads((reports / "audit.json").read_text())["summary"]["failed"]
    assert out["exit-code"] == ("1" if failed else "0")
    assert out["result"] == ("failed" if failed else "passed")
    assert gh.summary.read_text().startswith("## cudaship audit")
    assert ET.parse(reports / "audit.junit.xml").getroot().tag in ("testsuites", "testsuite")
    assert (reports / "gpus.html").read_text().lstrip().lower().startswith("<!doctype html")
    gate_env = gh.env("gate", {"AUDIT_EXIT_CODE": out["exit-code"]})
    assert action_steps.main(["gate"], gate_env) == int(out["exit-code"])


def test_audit_step_without_wheels(tmp_path: Path) -> None:
    gh = FakeGitHub(tmp_path)
    environ = gh.env("audit", {"CUDASHIP": stand_in_cudaship(tmp_path, 0), "INPUT_WHEELS": "dist/*.whl"})
    assert action_steps.main(["audit"], environ) == 0
    assert gh.output("audit")["result"] == "error"
    assert "No wheel matches `dist/*.whl`" in gh.summary.read_text()
    gate_env = gh.env("gate", {"AUDIT_EXIT_CODE": "2"})
    assert action_steps.main(["gate"], gate_env) == 2


def test_audit_step_command_missing(tmp_path: Path) -> None:
    gh = FakeGitHub(tmp_path)
    make_wheel(gh.workspace / "dist", "demo-1.0-py3-none-any.whl")
    environ = gh.env("audit", {"CUDASHIP": str(tmp_path / "no-such-cudaship")})
    assert action_steps.main(["audit"], environ) == 0
    assert gh.output("audit")["result"] == "error"


@pytest.mark.parametrize(
    ("argv", "extra", "code"),
    [
        pytest.param([], {}, 2, id="no-step"),
        pytest.param(["deploy"], {}, 2, id="unknown-step"),
        pytest.param(["gate"], {"AUDIT_EXIT_CODE": ""}, 2, id="gate-without-code"),
        pytest.param(
            ["gate"], {"AUDIT_EXIT_CODE": "1", "INPUT_FAIL_ON_FINDINGS": "maybe"}, 2, id="bad-boolean"
        ),
    ],
)
def test_steps_usage(tmp_path: Path, argv: list[str], extra: dict[str, str], code: int) -> None:
    gh = FakeGitHub(tmp_path)
    assert action_steps.main(argv, gh.env("x", extra)) == code


# ------------------------------------------------------------------------------------- action.yml run blocks

_EXPR = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def _substitute(value: str, inputs: Mapping[str, str], steps: Mapping[str, Mapping[str, str]]) -> str:
    def one(match: re.Match[str]) -> str:
        expr = match.group(1)
        if expr == "github.action_path":
            return str(ROOT)
        if expr.startswith("inputs."):
            return inputs[expr.removeprefix("inputs.")]
        m = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
        if m:
            return steps.get(m.group(1), {}).get(m.group(2), "")
        raise AssertionError(f"unexpected expression in a run step's env: {expr}")

    return _EXPR.sub(one, value)


@pytest.mark.slow
@pytest.mark.network
def test_action_run_blocks_end_to_end(tmp_path: Path) -> None:
    """Run every `run:` step of action.yml with bash, as the runner would: install, audit, gate."""
    action = load_yaml(ACTION)
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    inputs["python"] = sys.executable
    gh = FakeGitHub(tmp_path)
    make_wheel(gh.workspace / "dist", "demo-1.0-py3-none-any.whl")
    step_outputs: dict[str, dict[str, str]] = {}
    codes: dict[str, int] = {}
    for step in action["runs"]["steps"]:
        if "run" not in step:
            assert step["uses"].startswith("actions/upload-artifact@")
            continue
        env = {k: _substitute(str(v), inputs, step_outputs) for k, v in step.get("env", {}).items()}
        sid = step.get("id", step["name"])
        proc = subprocess.run(
            ["bash", "-c", step["run"]],
            env=gh.env(sid, env),
            cwd=gh.workspace,
            capture_output=True,
            text=True,
            check=False,
            timeout=540,
        )
        codes[sid] = proc.returncode
        step_outputs[sid] = gh.output(sid)
        if sid != "Fail on failed checks":
            assert proc.returncode == 0, proc.stdout + proc.stderr
    cudaship = Path(step_outputs["install"]["cudaship"])
    assert cudaship.is_file()
    audit = step_outputs["audit"]
    assert audit["result"] in ("passed", "failed", "error")
    assert codes["Fail on failed checks"] == int(audit["exit-code"]) or audit["exit-code"] == "0"
    assert gh.summary.read_text().strip()


def test_the_steps_script_errors_without_cudaship_in_one_line(tmp_path: Path) -> None:
    """action.yml runs action_steps.py as a file with whatever cudaship the job installed (the
    ``cudaship-version`` input may pin an older one), so its error path imports nothing of cudaship (only
    ``_append`` uses its safe_write); its ::error annotation still holds no control character, no second line
    and no legacy command, whatever the message names."""
    source = Path(action_steps.__file__).read_text(encoding="utf-8")
    imported = re.findall(r"^\s*from (cudaship\S*) import", source, re.MULTILINE)
    assert set(imported) <= {"cudaship.errors", "cudaship.safe_write"}, imported
    # run as action.yml runs it: a file, isolated from site-packages and the source tree
    done = subprocess.run(
        [sys.executable, "-I", "-S", action_steps.__file__, "audit"],
        env={
            "INPUT_WHEELS": "dist/x\x1b[2J\r\n::add-mask::s ##[error]*.whl",
            "GITHUB_WORKSPACE": str(tmp_path),
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert errors, (done.stdout, done.stderr)
    for line in errors:
        assert "\x1b" not in line and "\r" not in line and "##[" not in line, line
    assert all(line.startswith("::error") for line in done.stdout.splitlines() if line.startswith("::"))
