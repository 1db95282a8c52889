"""Every example in README.md and docs/*.md is run (issue 14): a newcomer copies them first.

Each fenced block of the documents is one case, found by reading the Markdown (so a new example is a new
case). How a block is checked follows from what it is:

- a console transcript (``$ cudaship ...`` lines followed by output): the command runs in the repository root
  and its output must match line by line (``...`` in the expected output stands for any lines);
- a command synopsis (``cudaship CMD [--option ...]``): every option it names is one the command accepts;
- command lines without output (``cudaship toolkit install ...``): parsed by the command's own parser;
- TOML: loaded as the configuration it shows (policy, arch table, matrix), used by the command reading it;
- the Action's YAML: every input it passes is one ``action.yml`` declares;
- JSON: what the real command writes holds every key and value the example shows;
- shell sessions (docs/formats.md): run in order in a scratch directory with nvcc;
- error messages: the inputs they describe are made and the messages compared;
- Python (docs/api.md): run in a scratch directory holding ``examples/`` (the repository's) and ``dist/`` (a
  real wheel, NVIDIA's CUDA runtime), where its own asserts must hold.

A block is skipped only when it needs a GPU or the network, and the skip says which; a few blocks are not
examples at all (a diagram, a captured debugger log) and are listed in ``NOT_EXAMPLES`` with why. A block no
rule covers fails, so an example cannot be added without being run.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest

from cudaship.cli.main import cli, main
from cudaship.exitcodes import ExitCode

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  #: line of the opening fence
    lang: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO).as_posix()}:{self.line}"

    @property
    def first(self) -> str:
        return self.text.splitlines()[0] if self.text.strip() else ""


def blocks() -> list[Block]:
    found = []
    for path in DOCUMENTS:
        text = path.read_text()
        for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            line = text[: match.start()].count("\n") + 1
            found.append(Block(path, line, match.group(1), match.group(2)))
    return found


BLOCKS = blocks()

#: Blocks that are not examples a reader runs, by the start of their first line, with why.
NOT_EXAMPLES = {
    "paths, wheels,  ──▶ inspection.scan": "a diagram of the layers",
    "#0  std::codecvt<char16_t": "a cuda-gdb backtrace captured on the lent H200 machine",
    "exec /opt/gcc/bin/g++-real": "one line of a compiler wrapper found on the lent H200 machine",
    "python -c \"import zipfile; z = zipfile.ZipFile('torch-2.14.1": "commands on the 555 MB torch wheel; "
    "tests/program/test_import_libs.py checks the same facts (nm -D against the shim headers) on every run",
    '"import_libraries": [': "an excerpt of provenance.json; tests/program/test_import_libs.py writes such a "
    "record and reads it back",
    "apt-get install --reinstall -y mingw-w64": "the commands of a measured clean-clone run of the suite "
    "(the suite itself: ./scripts/test)",
    "model.pt2: AOTInductor package": "program inspect of the Windows package exported on the lent H200 "
    "(tests/program/test_windows_program.py and test_import_libs.py check such lines on packages built here)",
    "[tool.cibuildwheel.linux]": "cibuildwheel's configuration, not cudaship's (docs/ci.md, repair)",
    "nvidia :: cuda_version_lower_bound :: 12.8": "the property syntax of a variant.json (docs/variants.md)",
    "variant: nvidia :: ": "audit findings on the variant wheels tests/checks/test_variant_wheels.py and "
    "test_variant_props.py build, which assert these lines",
    "ERROR   variant release: coverage": "the finding tests/checks/test_variant_release.py asserts on four "
    "hand-built variants plus null",
}

#: Blocks that need a GPU or the network, by the start of their first line, with which and why.
NEEDS = {
    "$ cudaship gpus .../torch/lib/libtorch_cuda.so": "network and GPU: PyTorch 2.11.0+cu130's "
    "libtorch_cuda.so "
    "(a 900 MB wheel) judged for the driver of the lent H200 machine",
    "$ cudaship doctor --env": "network: environments installed from real PyPI wheels (torch 2.8.0 for "
    "CUDA 12, 6.4 GB); tests/cli/test_doctor_env_cli.py checks the same findings on them",
    "$ cudaship doctor": "GPU: reads this machine's NVIDIA driver and GPUs",
    "installed packages with device code": "GPU: `cudaship doctor` output on the lent H200 machine",
    "/tmp/e-bad: program run": "GPU: `cudaship program run` output on the lent H200 machine",
    "cudaship program check DIR --here": "GPU: run on the Windows target machine, in the directory "
    "program export wrote",
    "$ cudaship program export demo-mlp --out /tmp/e1": "GPU and torch: `cudaship program export` on the "
    "lent H200 machine, whose $CXX links libstdc++ statically (tests/program/test_toolchain.py checks the "
    "same choice and error with a g++ made to link it statically)",
    "python3 -m venv .venv": "network: pip installs cudaship's dependencies from PyPI into a new environment "
    "(the same inspect command is run by the README transcript case)",
    "python benchmarks/inspect.py": "network: the benchmark downloads nvidia-cublas wheels (546 MB library); "
    "its options are checked against --help instead",
}


def _skip_reason(block: Block) -> str | None:
    for start, why in NEEDS.items():
        if block.first.startswith(start):
            return why
    return None


def _case_id(block: Block) -> str:
    return block.id


# -- the runners ------------------------------------------------------------------------------------------


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def match_lines(expected: list[str], actual: list[str]) -> None:
    """``expected`` against ``actual``; a line ``...`` matches any run of lines (also none)."""
    pattern = "".join(
        ".*?\n" if line.strip() == "..." else re.escape(line.rstrip()) + "\n" for line in expected
    )
    text = "".join(line.rstrip() + "\n" for line in actual)
    pattern = pattern.replace(".*?\n", "(?:.*\n)*?")
    assert re.fullmatch(pattern, text), f"expected:\n{''.join(e + chr(10) for e in expected)}\ngot:\n{text}"


def check_transcript(block: Block, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``$ cudaship ...`` lines, each followed by its output. Output that starts with ``...`` is an excerpt
    (it may also stop early); a command shown without output must succeed; one whose input files a reader
    would have (``dist/*.whl``, ``some_wheel-...whl``) but this repository has not is parsed instead.
    ``-o FILE`` goes to a scratch directory."""
    sessions: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            sessions.append((line[2:], []))
        elif sessions:
            sessions[-1][1].append(line)
    assert sessions
    for command, expected in sessions:
        argv = shlex.split(command)
        assert argv[0] == "cudaship", command
        path, rest = _command_path(argv)
        inputs = [w for w in rest if not w.startswith("-") and re.search(r"\.(whl|so|dll|pt2|pte)$", w)]
        if any(not Path(w).exists() for w in inputs):
            with _command(path).make_context(" ".join(["cudaship", *path]), list(rest)):
                pass
            continue
        for i, word in enumerate(argv[:-1]):
            if word in ("-o", "--output"):
                argv[i + 1] = str(tmp_path / Path(argv[i + 1]).name)
        code, out, err = run_cli(argv[1:], capsys)
        assert code == ExitCode.OK, f"{command}: exit {code}: {err}"
        if expected and expected[0].strip() == "...":
            expected = [*expected, "..."]
        if expected:
            match_lines(expected, out.rstrip("\n").splitlines())


def _command_path(words: list[str]) -> tuple[list[str], list[str]]:
    """Split ``cudaship program check DIR --x`` into the subcommand path and the rest."""
    path = []
    group: click.Command = cli
    rest = words[1:]
    while rest and isinstance(group, click.Group):
        sub = group.commands.get(rest[0]) if hasattr(group, "commands") else None
        if sub is None:
            sub = group.get_command(click.Context(group), rest[0])
        if sub is None:
            break
        path.append(rest[0])
        group = sub
        rest = rest[1:]
    return path, rest


def _command(path: list[str]) -> click.Command:
    command: click.Command = cli
    ctx = click.Context(cli)
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(ctx, name)
        assert found is not None, path
        command = found
    return command


def _options(command: click.Command) -> set[str]:
    names: set[str] = set()
    for param in command.params:
        names.update(getattr(param, "opts", ()))
        names.update(getattr(param, "secondary_opts", ()))
    return names


def _lines_of_commands(text: str) -> list[str]:
    """Command lines, continuation lines (indented) joined to the one they continue."""
    joined: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):  # a comment line of the example
            continue
        if line.startswith((" ", "\t")) and joined:
            joined[-1] += " " + line.strip()
        elif line.strip():
            joined.append(line.strip())
    return joined


def check_synopsis(block: Block) -> None:
    """``cudaship CMD [--option VALUE|...] ...``: every option named exists on that command."""
    for line in _lines_of_commands(block.text):
        words = line.split(" | ", 1)[0].split()  # what a pipe feeds (jq) is not cudaship's
        assert words[0] == "cudaship", line
        path, rest = _command_path(words)
        assert path, f"no such command: {line}"
        accepted = _options(_command(path))
        named = {m.group(0) for m in re.finditer(r"(?<![\w-])--?[A-Za-z][\w-]*", " ".join(rest))}
        # `--no-x` of a `--x/--no-x` flag and a `-x` short form are both accepted spellings
        unknown = sorted(n for n in named if n not in accepted)
        assert not unknown, f"{line}: options not accepted by cudaship {' '.join(path)}: {unknown}"


def check_parses(block: Block) -> None:
    """Command lines shown without output (they download, or need files the reader has): each parses with
    the command's own parser, so every option and value is one the command accepts."""
    for line in _lines_of_commands(block.text):
        command_text = line.split(" | ", 1)[0].split("  #", 1)[0]
        words = shlex.split(command_text)
        path, rest = _command_path(words)
        command = _command(path)
        with command.make_context(" ".join(["cudaship", *path]), list(rest), resilient_parsing=False):
            pass


def _load_config(text: str, tmp_path: Path) -> tuple[Any, Path]:
    from cudaship.config import load_config

    if text.lstrip().startswith("[tool.cudaship"):
        target = tmp_path / "pyproject.toml"
        target.write_text('[project]\nname = "demo"\nversion = "1.0"\n\n' + text)
    else:
        target = tmp_path / "cudaship.toml"
        target.write_text(text)
    return load_config(str(target)), target


def check_toml(block: Block, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A configuration example: valid TOML, accepted by the loader of each part it shows, and usable."""
    data = tomllib.loads(block.text)
    config, target = _load_config(block.text, tmp_path)
    tables = data.get("tool", {}).get("cudaship", data)
    if "audit" in tables or not ({"archs", "matrix"} & set(tables)):
        from cudaship.checks.table import load_policy

        load_policy(config)
    if "archs" in tables:
        from cudaship.ci.archs import arch_table

        table = arch_table(config)
        for train in table.trains():
            for machine in table.machines(train):
                assert table.lookup(train, machine).archs()
    if "matrix" in tables:
        code, out, err = run_cli(
            ["matrix", "--policy", str(target), "--event", "push", "--format", "json"], capsys
        )
        assert code == ExitCode.OK, err
        assert json.loads(out)["include"]


def check_action_yaml(block: Block) -> None:
    import yaml

    action = yaml.safe_load((REPO / "action.yml").read_text())
    (step,) = yaml.safe_load(block.text)
    assert step["uses"] == "your-org/cudaship@main"  # the placeholder of docs/ci.md (tests/ci/test_action.py)
    unknown = sorted(set(step["with"]) - set(action["inputs"]))
    assert not unknown, f"inputs action.yml does not declare: {unknown}"


def _holds(actual: Any, shown: Any, where: str) -> None:
    if isinstance(shown, dict):
        assert isinstance(actual, dict), where
        for key, value in shown.items():
            if key == "...":
                continue
            assert key in actual, f"{where}.{key} missing"
            _holds(actual[key], value, f"{where}.{key}")
    elif isinstance(shown, list) and shown and isinstance(shown[0], dict):
        assert isinstance(actual, list) and len(actual) >= len(shown), where
        for i, item in enumerate(shown):
            _holds(actual[i], item, f"{where}[{i}]")
    else:
        assert actual == shown, f"{where}: {actual!r} != {shown!r}"


def check_inspect_json(block: Block, capsys: pytest.CaptureFixture[str]) -> None:
    shown = json.loads(block.text)
    code, out, err = run_cli(["inspect", "--format", "json", *shown["inputs"]], capsys)
    assert code == ExitCode.OK, err
    actual = json.loads(out)
    actual["files"][0]["device_code"] = [
        d for d in actual["files"][0]["device_code"] if d["kind"] == "ptx"
    ]  # the example shows the PTX entry only
    _holds(actual, shown, "$")


@functools.cache
def _shell_document(path: Path) -> tuple[str, ...]:
    """Run every ``sh`` block of one document in order in one scratch directory (later blocks use the files
    earlier ones made); the output of each block, cut at the first that failed (its output then ends with
    ``exit N``)."""
    scratch = Path(tempfile.mkdtemp(prefix="cudaship-doc-"))
    shim = scratch / ".bin"
    shim.mkdir()
    # a script, not a link: a link to a virtual environment's python outside it loses the environment
    (shim / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (shim / "python").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    parts = [b.text for b in BLOCKS if b.path == path and b.lang == "sh"]
    script = "\n".join(f"{text}\necho '@@block-done@@'" for text in parts)
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    shutil.rmtree(scratch, ignore_errors=True)
    outputs = done.stdout.split("@@block-done@@\n")
    if done.returncode != 0:
        outputs[-1] += f"\n{done.stderr[-3000:]}\nexit {done.returncode}"
    return tuple(outputs)


def check_shell_session(block: Block) -> None:
    """A shell block of docs/formats.md, run with the blocks before it (they share files), with nvcc."""
    for tool in ("nvcc", "xxd", "readelf"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not on PATH")
    same_doc = [b for b in BLOCKS if b.path == block.path and b.lang == "sh"]
    index = same_doc.index(block)
    outputs = _shell_document(block.path)
    assert len(outputs) > index + 1, f"{same_doc[len(outputs) - 1].id} failed:\n{outputs[-1]}"


def check_error_lines(
    block: Block, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """Error messages the documents quote, from inputs made to match."""
    monkeypatch.chdir(tmp_path)
    for line in block.text.splitlines():
        if "audit.archs.ptx: must be one of" in line:
            (tmp_path / "cudaship.toml").write_text('[audit.archs]\nptx = "sometimes"\n')
            wheel = tmp_path / "x-1.0-py3-none-any.whl"
            wheel.write_bytes(b"")
            code, _, err = run_cli(
                ["audit", "--no-progress", "--policy", "cudaship.toml", str(wheel)], capsys
            )
            assert code == ExitCode.BAD_INPUT and err.strip() == line
        elif "forbidden_imports[1].libraries: is required" in line:
            (tmp_path / "pyproject.toml").write_text(
                '[tool.cudaship.audit]\nforbidden_imports = [{libraries = ["*.so"], patterns = ["x"]}, '
                '{patterns = ["libcuda.so*"]}]\n'
            )
            code, _, err = run_cli(
                ["audit", "--no-progress", "--policy", "pyproject.toml", "x-1.0-py3-none-any.whl"], capsys
            )
            assert code == ExitCode.BAD_INPUT and err.strip() == line
        elif "libtext.so: not a binary cudaship reads" in line:
            (tmp_path / "libtext.so").write_text("just some text\n")  # INPUT(...) is a linker script: read
            code, _, err = run_cli(["inspect", "libtext.so"], capsys)
            assert code == ExitCode.BAD_INPUT and err.strip() == line
        elif "truncated.dll: PE: section .text" in line:
            # the quoted one is a real 230 kB DLL cut to 4 kB; the same message for a mingw DLL cut short
            dll = _mingw_dll(tmp_path)
            data = dll.read_bytes()
            (tmp_path / "truncated.dll").write_bytes(data[:4096])
            code, _, err = run_cli(["inspect", "truncated.dll"], capsys)
            shape = re.sub(r"0x[0-9a-f]+|\d+", "N", line)
            assert code == ExitCode.BAD_INPUT and re.sub(r"0x[0-9a-f]+|\d+", "N", err.strip()) == shape
        elif "corrupt.fatbin: fatbin entry at 0x10 claims" in line:
            fatbin = bytearray(_example_fatbin())
            fatbin[16 + 8 : 16 + 16] = (1 << 63).to_bytes(8, "little")  # the first entry's payload size
            (tmp_path / "corrupt.fatbin").write_bytes(bytes(fatbin))
            code, _, err = run_cli(["inspect", "corrupt.fatbin"], capsys)
            shape = re.sub(r"\d+", "N", line)
            assert code == ExitCode.BAD_INPUT and re.sub(r"\d+", "N", err.strip()) == shape
        elif "compression ratio" in line and "(zip bomb?)" in line:
            import zipfile

            bomb = tmp_path / "bomb-1.0-py3-none-any.whl"
            with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
                zf.writestr("bomb/libbomb.so", b"\x7fELF" + bytes(40 << 20))
                zf.writestr("bomb-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
                zf.writestr(
                    "bomb-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: bomb\nVersion: 1.0\n"
                )
                zf.writestr("bomb-1.0.dist-info/RECORD", "")
            code, _, err = run_cli(["inspect", bomb.name], capsys)
            shape = re.sub(r"\d+", "N", line)
            assert code == ExitCode.BAD_INPUT and re.sub(r"\d+", "N", err.strip()) == shape
        elif "component nvcc cannot be assembled from PyPI for CUDA 12.8.1" in line:
            # refused from the data before pip runs: no index is asked
            argv = ["toolkit", "install", "cu128", "--source", "pypi", "-c", "nvcc", "--dest", "cuda12"]
            code, _, err = run_cli([*argv, "--cache-dir", str(tmp_path / "cache")], capsys)
            assert code == ExitCode.BAD_INPUT and err.strip().splitlines()[-1] == line.strip()
            assert not (tmp_path / "cuda12").exists()
        elif "CMAKE_CUDA_COMPILER would name this file, but it does not exist" in line:
            # a toolkit `cudaship toolkit install -c cudart` made: its manifest, no bin/; quoted at /opt/cuda
            root = tmp_path / "cuda"
            root.mkdir()
            (root / "cudaship-toolkit.json").write_text(
                json.dumps({"schema": 1, "release": "13.0.2", "components": [{"component": "cudart"}]})
            )
            monkeypatch.delenv("CUDACXX", raising=False)
            code, out, err = run_cli(
                ["cmake", "--train", "cu130", "--platform", "linux-x86_64", "--toolkit", str(root)], capsys
            )
            assert code == ExitCode.BAD_INPUT and out == ""
            assert err.strip().replace(root.as_posix(), "/opt/cuda") == line.strip()
        else:
            raise AssertionError(f"{block.id}: no input made for {line!r}")


def _mingw_dll(tmp_path: Path) -> Path:
    gcc = shutil.which("x86_64-w64-mingw32-gcc")
    if gcc is None:
        pytest.skip("x86_64-w64-mingw32-gcc is not installed")
    source = tmp_path / "big.c"
    source.write_text("int table[4096] = {1};\n__declspec(dllexport) int f(int i) { return table[i]; }\n")
    subprocess.run([gcc, "-shared", "-O0", "-o", str(tmp_path / "big.dll"), str(source)], check=True)
    return tmp_path / "big.dll"


def _example_fatbin() -> bytes:
    from cudaship.binary.devicescan import scan_containers

    data = (REPO / "examples" / "libvecadd.so").read_bytes()
    container = scan_containers(data).containers[-1]
    return data[container.offset : container.offset + container.size]


def check_output_of(block: Block, capsys: pytest.CaptureFixture[str]) -> None:
    """A report shown without its command: the command of the document (`gpus` in gpus.md, `inspect` in
    inspect.md) on the repository file the report's first line names, shown as an excerpt."""
    command = {"gpus.md": "gpus", "inspect.md": "inspect"}[block.path.name]
    target = next(w for w in re.split(r"[\s:]+", block.first) if w and (REPO / w).is_file())
    code, out, err = run_cli([command, target], capsys)
    assert code == ExitCode.OK, err
    match_excerpt(block.text.rstrip("\n").splitlines(), out.rstrip("\n").splitlines())


def match_excerpt(expected: list[str], actual: list[str]) -> None:
    """Every line of an excerpt appears in ``actual``, in order (``...`` lines skipped; ``…`` inside a line
    stands for the part of a long name left out)."""
    at = 0
    for line in expected:
        if not line.strip() or line.strip() == "...":
            continue
        pattern = re.compile(".*?".join(re.escape(part) for part in line.rstrip().split("…")) + r"\s*")
        while at < len(actual) and not pattern.fullmatch(actual[at]):
            at += 1
        assert at < len(actual), f"{line!r} not found (in order) in:\n" + "\n".join(actual)
        at += 1


def _names_a_repo_file(block: Block) -> bool:
    return block.path.name in ("gpus.md", "inspect.md") and any(
        w and "/" in w and (REPO / w).is_file() for w in re.split(r"[\s:]+", block.first)
    )


def check_summaries(block: Block, capsys: pytest.CaptureFixture[str]) -> None:
    """Summary lines of three libraries: the first is the README example's, checked; the others are
    bitsandbytes 0.50.2's CUDA 11.8 library and a library without device code (checked in
    tests/cli/test_inspect_cli.py with the wheel, which needs the network)."""
    code, out, _ = run_cli(["inspect", "--format", "json", "examples/libvecadd.so"], capsys)
    assert code == ExitCode.OK
    assert json.loads(out)["files"][0]["summary"] == block.text.splitlines()[0]


def check_audit_output(block: Block, synthetic_wheel: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The audit report shown: the synthetic executorch wheel whose shim DLL lacks SASS sm_120 (the variant
    ``win_arch_missing`` the tests build), with the policy the example names."""
    expected = block.text.rstrip("\n").splitlines()
    wheel = synthetic_wheel("win_arch_missing")
    name = expected[2].split()[0]
    if wheel.name != name:
        pytest.fail(f"the example shows {name}; the synthetic windows wheel is {wheel.name}")
    policy = expected[0].split("policy: ", 1)[1]
    code, out, err = run_cli(["audit", "--no-progress", "--policy", policy, str(wheel)], capsys)
    assert code in (ExitCode.OK, ExitCode.FINDINGS), err
    actual = [line.replace(str(wheel), wheel.name) for line in out.rstrip("\n").splitlines()]
    match_lines(expected, actual)


def check_python_tool(block: Block) -> None:
    """``python benchmarks/x.py`` / ``python -m fuzz`` lines: each option named is in the tool's --help."""
    for line in _lines_of_commands(block.text):
        command_text = line.split("  #", 1)[0]
        words = shlex.split(command_text)
        if words[:2] == ["pip", "install"]:
            continue
        assert words[0] == "python", line
        tool = words[1:3] if words[1] == "-m" else words[1:2]
        options = re.findall(r"(?<![\w-])--[a-z][\w-]*", command_text)
        if not options:  # nothing to check but that the tool exists
            if tool[0] == "-m":
                module = REPO / tool[1].replace(".", "/")
                assert module.with_suffix(".py").is_file() or module.is_dir(), line
            else:
                assert (REPO / tool[0]).is_file(), line
            continue
        done = subprocess.run(
            [sys.executable, *tool, "--help"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])},
        )
        assert done.returncode == 0, done.stderr
        for option in options:
            assert option in done.stdout, f"{line}: {option} not in {' '.join(tool)} --help"


def check_python(block: Block, tmp_path: Path, request: Any, monkeypatch: Any) -> None:
    """A Python example of the API, run as a script would run it: in a directory with ``examples/`` and a
    ``dist/`` of one real wheel (``cudart_linux_wheel``, 2.5 MB). Its asserts are the check."""
    wheel = request.getfixturevalue("cudart_linux_wheel")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / wheel.name).symlink_to(wheel)
    monkeypatch.chdir(tmp_path)
    exec(compile(block.text, block.id, "exec"), {"__name__": "__main__"})


# -- the cases --------------------------------------------------------------------------------------------


def _kind(block: Block) -> str:
    first = block.first
    if any(first.startswith(s) for s in NOT_EXAMPLES):
        return "not-example"
    if block.lang == "toml":
        return "toml"
    if block.lang == "yaml":
        return "action-yaml"
    if block.lang == "json":
        return "inspect-json"
    if block.lang == "python":
        return "python"
    if first.startswith("$ cudaship"):
        return "transcript"
    if block.lang == "sh" and first == "./scripts/test":
        return "suite"
    if block.lang == "sh" and block.path.name == "formats.md":
        return "shell-session"
    if first.startswith("cudaship audit · policy:"):
        return "audit-output"
    if first.startswith("cudaship: error:"):
        return "errors"
    if first.startswith(("pip install", "python ")):
        return "python-tool"
    if first.startswith("sm_75 sm_80"):
        return "summaries"
    if _names_a_repo_file(block):
        return "output-of"
    if first.startswith("cudaship ") and "[" in block.text:
        return "synopsis"
    if first.startswith("cudaship "):
        return "parses"
    return "unknown"


@pytest.mark.parametrize("block", BLOCKS, ids=_case_id)
def test_documented_example(
    block: Block,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    request: Any,
) -> None:
    kind = _kind(block)
    if kind == "not-example":
        pytest.skip(
            f"not an example: {next(w for s, w in NOT_EXAMPLES.items() if block.first.startswith(s))}"
        )
    reason = _skip_reason(block)
    if reason is not None:
        if kind == "python-tool":
            check_python_tool(block)
            return
        pytest.skip(reason)
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    if kind == "transcript":
        check_transcript(block, tmp_path, capsys)
    elif kind == "synopsis":
        check_synopsis(block)
    elif kind == "parses":
        check_parses(block)
    elif kind == "toml":
        check_toml(block, tmp_path, capsys)
    elif kind == "action-yaml":
        check_action_yaml(block)
    elif kind == "inspect-json":
        check_inspect_json(block, capsys)
    elif kind == "shell-session":
        check_shell_session(block)
    elif kind == "errors":
        check_error_lines(block, tmp_path, capsys, monkeypatch)
    elif kind == "summaries":
        check_summaries(block, capsys)
    elif kind == "output-of":
        check_output_of(block, capsys)
    elif kind == "audit-output":
        check_audit_output(block, request.getfixturevalue("synthetic_wheel"), capsys)
    elif kind == "python-tool":
        check_python_tool(block)
    elif kind == "python":
        check_python(block, tmp_path, request, monkeypatch)
    elif kind == "suite":
        # the README's test command is CI's: .ci/run runs exactly it (running the suite inside itself is not)
        assert (REPO / ".ci" / "run").read_text().rstrip().endswith("exec ./scripts/test")
    else:
        pytest.fail(
            f"{block.id}: no rule runs this example ({block.first!r}); add one to {Path(__file__).name}"
        )
