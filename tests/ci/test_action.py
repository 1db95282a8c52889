"""The GitHub Action: schema-valid, and its shell steps run locally with a fake GITHUB_* environment, as a
user's workflow runs them: from a checkout of the Action that is not the repository under test, with no
package index (issue 35)."""

from __future__ import annotations

import collections
import fnmatch
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from packaging.requirements import Requirement

from cudaship.ci import action_steps
from tests.fixtures import built_once, cache_dir, content_key
from tests.fixtures.synthetic_wheels import write_wheel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

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
    for needle in ("cudaship matrix", "--derive e2e", "cudaship env", f"uses: {ACTION_REPO}@", "fromJSON"):
        assert needle in text
    assert not (ROOT / ".github" / "workflows" / "release.yml").exists()


# ----------------------------------------------------------------- the docs' workflow in a user's repository

#: The placeholder docs/ci.md and the example workflow give the Action's repository (a user writes the owner
#: of the cudaship repository they use, and pins the ref).
ACTION_REPO = "your-org/cudaship"
CI_DOC = ROOT / "docs" / "ci.md"


def _pinned_ref(workflow: Mapping[str, Any]) -> tuple[str, str]:
    """The ref every ``uses: your-org/cudaship@REF`` of the workflow names (one for all) and the git URL
    its jobs install cudaship from (``env.CUDASHIP_GIT``), checked to name the same repository and ref."""
    refs = set()
    for job in workflow["jobs"].values():
        for step in job.get("steps", []):
            uses = step.get("uses", "")
            assert not uses.startswith("./"), f"a local action: {uses!r} exists only in cudaship's repository"
            if uses and not uses.startswith("actions/"):
                repo, _, ref = uses.partition("@")
                assert repo == ACTION_REPO and ref, uses
                refs.add(ref)
    (ref,) = refs
    git = workflow["env"]["CUDASHIP_GIT"]
    assert git == f"git+https://github.com/{ACTION_REPO}@{ref}", git
    return ref, git


def _cudaship_requirements(command: str, git: str) -> list[Requirement]:
    """The arguments of ``pip install`` lines of a shell command that name cudaship, as requirements
    (``${{ env.CUDASHIP_GIT }}`` read as ``git``)."""
    found = []
    for line in command.replace("${{ env.CUDASHIP_GIT }}", git).splitlines():
        if "pip install" not in line:
            continue
        words = shlex.split(line.split("  #", 1)[0])
        if "pip" in words and "install" in words:
            found += [Requirement(w) for w in words if "cudaship" in w and not w.startswith("-")]
    return found


def test_example_workflow_and_docs_install_a_cudaship_that_exists() -> None:
    """issue 35: cudaship is on no package index, so every job of the example workflow installs it from the
    Action's repository at the ref its ``uses:`` pins (no ``uses: ./``, which exists only in cudaship's own
    repository); docs/ci.md shows the same ``uses:``, its cibuildwheel snippet installs the same git URL."""
    workflow = load_yaml(WORKFLOW)
    ref, git = _pinned_ref(workflow)
    installs = 0
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            for requirement in _cudaship_requirements(step.get("run", ""), git):
                assert (requirement.name, requirement.url) == ("cudaship", git), (job_id, str(requirement))
                installs += 1
    assert installs == 5  # matrix, build, e2e-matrix, export, e2e

    doc = CI_DOC.read_text(encoding="utf-8")
    assert "uses: ./" not in doc
    shown = [
        r for block in re.findall(r"```\n(.*?)```", doc, re.S) for r in _cudaship_requirements(block, git)
    ]
    assert len(shown) == 2 and all((r.name, r.url) == ("cudaship", git) for r in shown), shown
    (action_block,) = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    (step,) = yaml.safe_load(action_block)
    assert step["uses"] == f"{ACTION_REPO}@{ref}"
    (cibuildwheel,) = [b for b in re.findall(r"```toml\n(.*?)```", doc, re.S) if "[tool.cibuildwheel" in b]
    befores = [
        table["before-build"] for table in tomllib.loads(cibuildwheel)["tool"]["cibuildwheel"].values()
    ]
    assert len(befores) == 2
    for before in befores:
        (requirement,) = _cudaship_requirements(before, git)
        assert (requirement.name, requirement.url) == ("cudaship", git), before


def _matrix_rows(tmp_path: Path) -> dict[str, list[dict[str, str]]]:
    """The rows the example workflow's matrix jobs get, made by `cudaship matrix` as its jobs run it, from the
    [tool.cudaship.matrix] table docs/ci.md shows: the build matrix of a push (every row) and the e2e
    matrix derived from it, keyed by the ``needs.JOB.outputs.NAME`` the workflow reads them from."""
    (table,) = [
        b for b in re.findall(r"```toml\n(.*?)```", CI_DOC.read_text(), re.S) if "[tool.cudaship.matrix]" in b
    ]
    (tmp_path / "pyproject.toml").write_text(table)
    command = [sys.executable, "-m", "cudaship", "matrix", "--policy", "pyproject.toml", "--event", "push"]
    subprocess.run([*command, "-o", "build-matrix.json"], cwd=tmp_path, check=True, capture_output=True)
    e2e = subprocess.run(
        [*command, "--derive", "e2e", "--from", "build-matrix.json", "--format", "json"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    )
    build = json.loads((tmp_path / "build-matrix.json").read_text())["include"]
    return {"matrix.build": build, "e2e-matrix.e2e": json.loads(e2e.stdout)["include"]}


def _evaluate(text: str, row: Mapping[str, str], env: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        context, _, name = match.group(1).partition(".")
        if context == "matrix":
            return str(row[name])
        if context == "env":
            return env[name]
        raise AssertionError(f"an expression an artifact name cannot use here: {match.group(0)}")

    return _EXPR.sub(one, text)


def test_example_workflow_artifact_names_are_unique_across_its_matrices(tmp_path: Path) -> None:
    """Every artifact the example workflow uploads, over every row of its expanded matrices (and the
    Action's report artifact, named by its ``artifact-name``), has a name of its own (upload-artifact@v4
    fails the second upload of a name in a run); every download names or matches an artifact a job it needs
    (directly or not) uploaded."""
    workflow = load_yaml(WORKFLOW)
    rows = _matrix_rows(tmp_path)
    env = {k: str(v) for k, v in workflow.get("env", {}).items()}
    uploaded: dict[str, list[str]] = {}  # job -> artifact names
    downloads: list[tuple[str, str, str]] = []  # job, 'name' or 'pattern', value
    for job_id, job in workflow["jobs"].items():
        matrix = job.get("strategy", {}).get("matrix")
        if matrix is None:
            job_rows: list[dict[str, str]] = [{}]
        else:
            m = re.fullmatch(r"\$\{\{\s*fromJSON\(needs\.([\w-]+)\.outputs\.([\w-]+)\)\s*\}\}", str(matrix))
            assert m, f"{job_id}: a matrix this test does not expand: {matrix}"
            job_rows = rows[f"{m.group(1)}.{m.group(2)}"]
            assert job_rows
        for row in job_rows:
            for step in job.get("steps", []):
                uses = step.get("uses", "")
                if uses.startswith("actions/upload-artifact@"):
                    uploaded.setdefault(job_id, []).append(_evaluate(step["with"]["name"], row, env))
                elif uses.startswith(f"{ACTION_REPO}@"):
                    name = step.get("with", {}).get("artifact-name", "")
                    assert name or matrix is None, (
                        f"{job_id}: the Action in a matrix job without artifact-name"
                    )
                    uploaded.setdefault(job_id, []).append(_evaluate(name, row, env))
                elif uses.startswith("actions/download-artifact@"):
                    key = "name" if "name" in step["with"] else "pattern"
                    downloads.append((job_id, key, _evaluate(step["with"][key], row, env)))
    names = [name for job_names in uploaded.values() for name in job_names]
    repeated = sorted(n for n, count in collections.Counter(names).items() if count > 1)
    assert not repeated, f"artifact names uploaded more than once in a run: {repeated[:5]}"
    assert len(names) == 1 + 2 * len(rows["matrix.build"]) + 2 * len(rows["e2e-matrix.e2e"])

    def needed(job_id: str) -> set[str]:
        needs = workflow["jobs"][job_id].get("needs", [])
        direct = {needs} if isinstance(needs, str) else set(needs)
        return direct.union(*(needed(n) for n in direct))

    for job_id, key, value in downloads:
        available = [name for job in needed(job_id) for name in uploaded.get(job, [])]
        matched = [n for n in available if (n == value if key == "name" else fnmatch.fnmatchcase(n, value))]
        assert matched, f"{job_id} downloads {key} {value!r}: no job it needs uploads it"


@pytest.mark.slow
@pytest.mark.network  # only to fill the wheelhouse once; pip itself runs with no index
def test_the_documented_git_requirement_installs_cudaship_without_an_index(tmp_path: Path) -> None:
    """The requirement the example workflow and docs/ci.md install (``cudaship @ git+https://github.com/
    your-org/cudaship@main``, here with the repository's address replaced by a local git repository of this
    checkout's files, the extra kept) is one pip resolves to cudaship with no index and no configuration."""
    ref, git = _pinned_ref(load_yaml(WORKFLOW))
    repository = copy_checkout(tmp_path / "cudaship")
    for args in (["init", "-q", "-b", ref], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repository, check=True
        )
    # file://localhost/...: pip's requirement parser wants a host in a git+file URL (git takes either)
    local = git.replace(f"https://github.com/{ACTION_REPO}", f"file://localhost{repository.as_posix()}")
    layout = RunnerLayout(tmp_path / "runner")
    environ = offline_env(layout, offline_wheelhouse())
    requirement = f"cudaship[repair] @ {local}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--no-deps",
            "-q",
            "--report",
            "-",
            requirement,
        ],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (item,) = json.loads(done.stdout)["install"]
    assert item["metadata"]["name"] == "cudaship"
    assert item["download_info"]["url"] == local.removeprefix("git+").rpartition("@")[0]
    assert item["download_info"]["vcs_info"]["requested_revision"] == ref


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


def test_default_artifact_names_differ_across_a_matrix(tmp_path: Path) -> None:
    """Two jobs of one matrix (one job id) audit wheels of one file name built for different trains, with
    ``artifact-name`` left empty: their report artifacts get different names (actions/upload-artifact@v4
    refuses a second artifact of a name in a run, so a fixed default fails every matrix job but the first);
    a given name is kept; the upload step of action.yml uploads under the name the audit step chose."""
    names = []
    for train in ("cu126", "cu130"):
        (tmp_path / train).mkdir()
        gh = FakeGitHub(tmp_path / train)
        (gh.workspace / "dist").mkdir()
        write_wheel(
            gh.workspace / "dist",
            name="demo",
            version="1.0",
            tag="cp312-cp312-linux_x86_64",
            files={"demo/_C.so": f"device code for {train}".encode()},
        )
        environ = gh.env("audit", {"CUDASHIP": stand_in_cudaship(tmp_path / train, 0), "GITHUB_JOB": "build"})
        assert action_steps.main(["audit"], environ) == 0
        names.append(gh.output("audit")["artifact-name"])
    assert len(set(names)) == 2, names
    assert all(
        re.fullmatch(r"cudaship-reports-build-demo-1\.0-cp312-cp312-linux_x86_64-[0-9a-f]{8}", n)
        for n in names
    )

    wheels = [make_wheel(tmp_path / "many", f"demo-1.0-cp3{m}-cp3{m}-linux_x86_64.whl") for m in (10, 11, 12)]
    many = action_steps.artifact_name("", wheels, {"GITHUB_JOB": "build"})
    assert re.fullmatch(
        r"cudaship-reports-build-demo-1\.0-cp310-cp310-linux_x86_64-and-2-more-[0-9a-f]{8}", many
    )
    assert action_steps.artifact_name(" reports-cu132-py3.12 ", wheels, {"GITHUB_JOB": "build"}) == (
        "reports-cu132-py3.12"
    )

    (upload,) = [
        s for s in load_yaml(ACTION)["runs"]["steps"] if s.get("uses", "").startswith("actions/upload")
    ]
    assert upload["with"]["name"] == "${{ steps.audit.outputs.artifact-name }}"
    assert load_yaml(ACTION)["inputs"]["artifact-name"]["default"] == ""


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


# ------------------------------------------------------------------- action.yml as a user's workflow runs it

_EXPR = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def _expression(
    expr: str, context: Mapping[str, str], inputs: Mapping[str, str], steps: Mapping[str, Mapping[str, str]]
) -> str:
    """The value of one ``${{ ... }}`` expression of action.yml: a context value (``github.action_path``),
    an input, or a step's output (empty when the step set none, as on GitHub)."""
    if expr in context:
        return context[expr]
    if expr.startswith("inputs."):
        return inputs[expr.removeprefix("inputs.")]
    m = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
    if m:
        return steps.get(m.group(1), {}).get(m.group(2), "")
    raise AssertionError(f"an expression this test does not evaluate: {expr}")


def _substitute(
    value: str, context: Mapping[str, str], inputs: Mapping[str, str], steps: Mapping[str, Mapping[str, str]]
) -> str:
    return _EXPR.sub(lambda m: _expression(m.group(1), context, inputs, steps), value)


def _condition(text: str | None, steps: Mapping[str, Mapping[str, str]], failed: bool) -> bool:
    """A step's ``if:``: none means ``success()``; else the ``&&`` of ``always()``, ``success()`` and
    ``steps.ID.outputs.NAME != ''`` / ``== ''`` (what action.yml uses; anything else fails the test)."""
    if text is None:
        return not failed
    result = True
    for term in (t.strip() for t in text.split("&&")):
        if term == "always()":
            continue
        if term == "success()":
            result = result and not failed
            continue
        m = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)\s*(!=|==)\s*''", term)
        assert m, f"a condition this test does not evaluate: {term}"
        value = steps.get(m.group(1), {}).get(m.group(2), "")
        result = result and ((value != "") if m.group(3) == "!=" else (value == ""))
    return result


@dataclass
class RunnerLayout:
    """A job's machine as GitHub lays it out (``/home/runner/work/REPO/REPO`` the workspace, the Action's
    repository checked out under ``_actions/OWNER/REPO/REF``, ``_temp``), with one ``$GITHUB_OUTPUT`` file per
    step, the job summary, and what the upload step was asked to upload."""

    root: Path
    job: str = "build"
    workspace: Path = field(init=False)
    action_path: Path = field(init=False)
    temp: Path = field(init=False)
    summary: Path = field(init=False)
    uploads: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workspace = self.root / "work" / "userproj" / "userproj"
        self.action_path = self.root / "work" / "_actions" / "your-org" / "cudaship" / "main"
        self.temp = self.root / "work" / "_temp"
        self.summary = self.temp / "_runner_file_commands" / "step_summary"
        for d in (self.workspace, self.temp, self.summary.parent):
            d.mkdir(parents=True, exist_ok=True)
        self.summary.write_text("")

    def env(
        self, step: str, base: Mapping[str, str], step_env: Mapping[str, str]
    ) -> tuple[dict[str, str], Path]:
        output = self.temp / "_runner_file_commands" / f"set_output_{step}"
        output.write_text("")
        environ = dict(base)
        environ.update(
            {
                "GITHUB_ACTIONS": "true",
                "GITHUB_JOB": self.job,
                "GITHUB_WORKSPACE": str(self.workspace),
                "GITHUB_ACTION_PATH": str(self.action_path),
                "GITHUB_OUTPUT": str(output),
                "GITHUB_STEP_SUMMARY": str(self.summary),
                "GITHUB_ENV": str(self.temp / "_runner_file_commands" / "set_env"),
                "RUNNER_TEMP": str(self.temp),
                "RUNNER_OS": "Linux",
            }
        )
        environ.update(step_env)
        return environ, output


def run_action(
    layout: RunnerLayout, with_: Mapping[str, str], base_env: Mapping[str, str], timeout: float = 540
) -> tuple[dict[str, dict[str, str]], dict[str, subprocess.CompletedProcess[str]]]:
    """Every step of the action.yml found at ``layout.action_path`` (the copy, not this repository's file),
    in order, as the runner does: each ``run:`` with its ``shell`` in the workspace, its ``env:`` evaluated
    (inputs: the ``with:`` values over action.yml's defaults), its outputs read back from its
    ``$GITHUB_OUTPUT``; an ``actions/upload-artifact`` step recorded in ``layout.uploads``."""
    action = load_yaml(layout.action_path / "action.yml")
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    unknown = set(with_) - set(inputs)
    assert not unknown, f"inputs action.yml does not declare: {unknown}"
    inputs.update(with_)
    context = {"github.action_path": str(layout.action_path), "github.job": layout.job}
    outputs: dict[str, dict[str, str]] = {}
    done: dict[str, subprocess.CompletedProcess[str]] = {}
    failed = False
    for step in action["runs"]["steps"]:
        sid = step.get("id", step["name"])
        if not _condition(step.get("if"), outputs, failed):
            continue
        if "uses" in step:
            assert step["uses"].startswith("actions/upload-artifact@"), step["uses"]
            layout.uploads.append(
                {k: _substitute(str(v), context, inputs, outputs) for k, v in step["with"].items()}
            )
            continue
        assert step["shell"] == "bash", step
        step_env = {k: _substitute(str(v), context, inputs, outputs) for k, v in step.get("env", {}).items()}
        environ, output = layout.env(sid, base_env, step_env)
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step["run"]],
            env=environ,
            cwd=layout.workspace,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
        done[sid] = proc
        outputs[sid] = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        failed = failed or proc.returncode != 0
    return outputs, done


def copy_checkout(dest: Path) -> Path:
    """This repository's files, as the runner checks out ``uses: OWNER/cudaship@REF``: the ones git tracks
    and the untracked ones it does not ignore (the working tree under test), without .git, .venv or builds."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=False,
    )
    if listed.returncode == 0:
        for name in filter(None, listed.stdout.decode().split("\0")):
            source = ROOT / name
            if source.is_file():  # a tracked file deleted in the working tree is not there to copy
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest / name)
    else:  # not a git checkout (an unpacked sdist)
        skip = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache")
        shutil.copytree(ROOT, dest, ignore=skip, dirs_exist_ok=True)
    return dest


def offline_wheelhouse() -> Path:
    """Wheels of all that installing cudaship from its checkout needs besides cudaship (its build backend,
    ``[build-system] requires``, and its ``dependencies``) for this Python and machine: downloaded once into
    the test cache; the Action's steps then run with pip allowed no index, only this directory."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = [*pyproject["build-system"]["requires"], *pyproject["project"]["dependencies"]]
    key = content_key(sys.version, sys.platform, platform.machine(), *wanted)

    def download(work: Path) -> None:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "-d", str(work), *wanted]
        subprocess.run(command, check=True, timeout=600)

    return built_once(cache_dir() / "action-wheelhouse" / key, download)


def offline_env(layout: RunnerLayout, wheelhouse: Path) -> dict[str, str]:
    """The job's environment on a runner without a package index: this process's, less GitHub's, pip's,
    cudaship's and Python's own settings (no PYTHONPATH: the venv must import what it installed), pip told
    to use no index and find links only in ``wheelhouse``, and every proxy pointing at a closed port of this
    machine, so that any download attempt fails at once."""
    dropped = ("GITHUB_", "RUNNER_", "INPUT_", "CUDASHIP", "PIP_", "PYTHON", "VIRTUAL_ENV")
    environ = {k: v for k, v in os.environ.items() if not k.upper().startswith(dropped)}
    environ = {k: v for k, v in environ.items() if "proxy" not in k.lower()}
    closed = "http://127.0.0.1:9"
    environ.update(
        {
            "PIP_CONFIG_FILE": os.devnull,  # no pip.conf: no extra index, no find-links of this machine
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(wheelhouse),
            "PIP_CACHE_DIR": str(layout.root / "pip-cache"),  # no wheel built earlier from another checkout
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "http_proxy": closed,
            "https_proxy": closed,
            "HTTP_PROXY": closed,
            "HTTPS_PROXY": closed,
            "XDG_CACHE_HOME": str(layout.root / "xdg-cache"),
        }
    )
    return environ


def user_repository(workspace: Path) -> Path:
    """A user's project (not cudaship) with its built wheel in dist/: returns the wheel."""
    (workspace / "pyproject.toml").write_text('[project]\nname = "userproj"\nversion = "1.0"\n')
    (workspace / "userproj").mkdir()
    (workspace / "userproj" / "__init__.py").write_text("")
    (workspace / "dist").mkdir()
    return write_wheel(
        workspace / "dist",
        name="userproj",
        version="1.0",
        tag="py3-none-any",
        files={"userproj/__init__.py": b"VERSION = '1.0'\n"},
    )


@pytest.mark.slow
@pytest.mark.network  # only to fill the wheelhouse once; the Action's steps themselves run with no index
def test_action_steps_in_a_user_workflow_without_an_index(tmp_path: Path) -> None:
    """issue 35: the Action as `uses: your-org/cudaship@main` runs it in a user's repository, with no
    package index: the install step installs cudaship from the Action's checkout (github.action_path), the
    audit step audits the user's wheel with it and writes the outputs, the upload step gets a report
    directory and a name of its own, the gate step passes the audit's verdict on."""
    layout = RunnerLayout(tmp_path)
    copy_checkout(layout.action_path)
    wheel = user_repository(layout.workspace)
    base = offline_env(layout, offline_wheelhouse())
    assert not (layout.workspace / "action.yml").exists() and layout.workspace != ROOT

    outputs, done = run_action(layout, {"python": sys.executable}, base)

    install = done["install"]
    assert install.returncode == 0, install.stdout + install.stderr
    venv = layout.temp / "cudaship-venv"
    assert Path(outputs["install"]["cudaship"]) == venv / "bin" / "cudaship"
    # installed from the Action's checkout (PEP 610's record of where pip got it), into the venv
    shown = subprocess.run(
        [
            outputs["install"]["python"],
            "-c",
            "import cudaship, importlib.metadata as m; print(cudaship.__file__); "
            "print(m.distribution('cudaship').read_text('direct_url.json'))",
        ],
        env=base,
        capture_output=True,
        text=True,
        check=True,
    )
    module, direct_url = shown.stdout.split("\n", 1)
    assert Path(module).is_relative_to(venv), module
    assert json.loads(direct_url)["url"] == layout.action_path.as_uri()

    audit = done["audit"]
    assert audit.returncode == 0, audit.stdout + audit.stderr
    out = outputs["audit"]
    reports = Path(out["report-dir"])
    assert reports == layout.workspace / "cudaship-reports"
    report = json.loads((reports / "audit.json").read_text())
    audited = json.dumps(report)
    assert wheel.name in audited
    failed = report["summary"]["failed"]
    assert (out["exit-code"], out["result"]) == (("1", "failed") if failed else ("0", "passed"))
    assert {p.name for p in reports.iterdir()} >= {"audit.md", "audit.junit.xml", "audit.json", "gpus.html"}
    assert wheel.name in layout.summary.read_text()
    # the upload step: the report directory, under a name derived from the job and the wheel
    (upload,) = layout.uploads
    assert upload["path"] == str(reports)
    assert upload["name"] == out["artifact-name"]
    assert upload["name"].startswith("cudaship-reports-build-userproj-1.0-py3-none-any-")
    gate = done["Fail on failed checks"]
    assert gate.returncode == int(out["exit-code"]), gate.stdout + gate.stderr
    # nothing written into the user's repository but the reports (pip built cudaship in the action path)
    assert {p.name for p in layout.workspace.iterdir()} == {
        "pyproject.toml",
        "userproj",
        "dist",
        "cudaship-reports",
    }
    # cudaship came from nowhere but the checkout: no index was reachable, none was configured
    assert "cudaship" not in {p.name.split("-")[0] for p in Path(base["PIP_FIND_LINKS"]).glob("*.whl")}


@pytest.mark.slow
def test_action_install_step_names_a_release_that_is_not_published(tmp_path: Path) -> None:
    """``cudaship-version`` names a release; pip installs that version from the index or the step fails
    with one annotation saying so and how to use the Action's own copy instead (here: no index at all)."""
    layout = RunnerLayout(tmp_path)
    copy_checkout(layout.action_path)
    base = offline_env(layout, tmp_path / "empty-wheelhouse")
    (tmp_path / "empty-wheelhouse").mkdir()
    for version, says in (
        ("9.9.9", "is that release published there?"),
        ("main; rm -rf /", "is not a version"),
    ):
        _, done = run_action(layout, {"python": sys.executable, "cudaship-version": version}, base)
        install = done["install"]
        assert install.returncode == 2, install.stdout + install.stderr
        (error,) = [line for line in install.stdout.splitlines() if line.startswith("::error")]
        assert says in error and "leave cudaship-version empty" in error
        assert set(done) == {"install"}  # the audit, upload and gate steps did not run
        assert not layout.uploads


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
