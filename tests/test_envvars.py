"""Every environment variable cudaship reads is in one table (src/cudaship/envvars.py, rendered into
docs/cli.md), and cudaship's own are validated: a bad value is one line naming the variable and the value,
exit 2, whichever command runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cudaship import envvars
from cudaship.cli.main import main
from cudaship.errors import CudashipError, UsageError
from cudaship.exitcodes import ExitCode
from cudaship.knowledge.local_toolkits import local_toolkits

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "cudaship"
EXAMPLE = str(REPO / "examples" / "libvecadd.so")

NAME = r"([A-Z][A-Z0-9_]+)"
#: A read of a variable named by a literal: os.environ.get("X"), environ["X"], env.get("X"), getenv("X"),
#: "X" in os.environ, click's envvar="X", envvars.get("X")
LITERAL_READS = [
    re.compile(rf"\b(?:environ|env|envvars)\.get\(\s*\"{NAME}\""),
    re.compile(rf"\benviron\[\s*\"{NAME}\"\s*\]"),
    re.compile(rf"\bgetenv\(\s*\"{NAME}\""),
    re.compile(rf"\"{NAME}\" (?:not )?in (?:os\.)?environ\b"),
    re.compile(rf"\benvvar=\"{NAME}\""),
    re.compile(rf"\b_append\(\s*\"{NAME}\""),  # the Action's steps append to the file a variable names
    re.compile(rf"\bappend_github_file\(\s*\"{NAME}\""),
]
#: A read through a name held in a variable: each such place and the variables it reads. A new place must be
#: added here (the test fails until it is), so no read escapes the table.
INDIRECT = {
    ("ci/cmake.py", "var"): {"CUDA_HOME", "CUDA_PATH"},
    ("ci/env.py", "name"): {"TORCH_CUDA_ARCH_LIST", "CMAKE_CUDA_ARCHITECTURES"},
    ("ci/github.py", "variable"): set(),  # append_github_file's callers name it: LITERAL_READS
    ("ci/action_steps.py", "path_var"): set(),  # _append's callers name it: LITERAL_READS
    ("program/export.py", "k"): set(),  # saves the toolchain variables export itself sets, to restore them
    ("program/export.py", "key"): set(),  # ... and restores them
    # the NVIDIA variant provider's override variables, named in knowledge/data/variant_providers.toml
    ("analysis/variant_pick.py", "p.force_sm_arch"): {"NV_VARIANT_PROVIDER_FORCE_SM_ARCH"},
    ("analysis/variant_pick.py", "p.force_driver"): {"NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION"},
    # the variables naming a local toolkit's root, named in knowledge/data/local_toolkits.toml
    ("knowledge/local_toolkits.py", "variable"): {v for t in local_toolkits() for v in t.variables},
}
INDIRECT_READ = re.compile(
    r"\b(?:environ|env|envvars)(?:\.get\(\s*|\[\s*)([a-z_][a-z0-9_.]*|[A-Z_]+_ENV)\s*[,)\]]"
)


def _sources() -> list[tuple[str, str]]:
    return [(p.relative_to(SRC).as_posix(), p.read_text(encoding="utf-8")) for p in sorted(SRC.rglob("*.py"))]


def test_every_variable_the_source_reads_is_in_the_table() -> None:
    table = {v.name for v in envvars.VARIABLES}
    read: set[str] = set()
    indirect_seen: set[tuple[str, str]] = set()
    for rel, text in _sources():
        if rel == "envvars.py":
            continue
        for pattern in LITERAL_READS:
            read.update(pattern.findall(text))
        for holder in INDIRECT_READ.findall(text):
            key = (rel, holder)
            assert key in INDIRECT, f"{rel} reads the variable named by {holder}: add it to INDIRECT"
            indirect_seen.add(key)
            read.update(INDIRECT[key])
    assert indirect_seen == set(INDIRECT)
    assert read - table == set(), "read by the source, missing from envvars.VARIABLES"
    # and nothing in the table that nothing reads
    assert table - read == set(), "in envvars.VARIABLES, read nowhere"
    # the known cases are found (the patterns work)
    assert {
        "CUDASHIP_PROCESSES",
        "CUDASHIP_OFFLINE",
        "CUDASHIP_INDEX_URL",
        "LD_LIBRARY_PATH",
        "NO_COLOR",
    } <= read


#: Any read of a variable that is not through envvars.get: os.environ / environ / env lookups, getenv, click's
#: envvar=.
OTHER_READS = [re.compile(rf"\b(?:environ|env)\.get\(\s*\"{NAME}\""), *LITERAL_READS[1:5]]


def test_cudaships_own_variables_are_read_one_way_through_envvars() -> None:
    """Every ``CUDASHIP_*`` variable is read by ``envvars.get`` (validated where it is read), never by
    ``os.environ``, ``getenv`` or click's ``envvar=`` (which would skip the check and treat an empty value
    its own way)."""
    for rel, text in _sources():
        if rel in ("envvars.py", "ci/action_steps.py"):  # the Action's script imports nothing of cudaship
            continue
        for pattern in OTHER_READS:
            ours = [name for name in pattern.findall(text) if name.startswith("CUDASHIP_")]
            assert not ours, f"{rel} reads {ours} without envvars.get"
        assert "envvar=" not in text, f"{rel}: click reads a variable itself; read it through envvars.get"


def test_docs_table_is_generated_from_the_table() -> None:
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    start, end = text.index(envvars.DOC_START), text.index(envvars.DOC_END) + len(envvars.DOC_END)
    assert text[start:end] == envvars.markdown()


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("CUDASHIP_PROCESSES", "bogus", "expected one of auto, always, never"),
        ("CUDASHIP_OFFLINE", "maybe", "expected one of '' (empty), 0, 1, true, false"),
        ("CUDASHIP_INDEX_URL", "pypi.org/simple", "expected an http(s):// URL"),
        ("CUDASHIP_INDEX_URL", "file:///srv/simple", "expected an http(s):// URL"),
        ("CUDASHIP_TRAIN", "cuda-twelve", "invalid CUDA train 'cuda-twelve'"),
        ("CUDASHIP_NO_MEMMEM", "please", "expected one of '' (empty), 0, 1"),
        ("CUDASHIP_CACHE_DIR", "<file>", "exists and is not a directory"),
        ("CUDASHIP_TOOLKIT", "<file>", "exists and is not a directory"),
        ("CUDASHIP_LIBCUDA", "<dir>", "a directory, not a library file"),
    ],
)
def test_a_bad_value_is_one_line_naming_it_and_its_exit_code(
    name: str,
    value: str,
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if value == "<file>":
        value = str(tmp_path / "a-file")
        Path(value).write_text("x")
    elif value == "<dir>":
        value = str(tmp_path)
    monkeypatch.setenv(name, value)
    # any command: inspect reads none of these, and still refuses to run with one of them wrong
    code = main(["inspect", EXAMPLE])
    out, err = capsys.readouterr()
    # exit 2, bad usage; a train that is not one is the train rule's exit 4, as with --train (docs/cli.md)
    assert code == (ExitCode.UNKNOWN_TRAIN if name == "CUDASHIP_TRAIN" else ExitCode.BAD_INPUT)
    assert out == ""
    assert err == f"cudaship: error: environment variable {name}={value!r}: {err.split(': ', 3)[3]}"
    assert problem in err and err.count("\n") == 1
    # the library's own read says the same (a program using cudaship, not the CLI)
    with pytest.raises(CudashipError, match=re.escape(f"{name}={value!r}")):
        envvars.get(name)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CUDASHIP_PROCESSES", "Never"),
        ("CUDASHIP_OFFLINE", "1"),
        ("CUDASHIP_OFFLINE", ""),
        ("CUDASHIP_INDEX_URL", ""),
        ("CUDASHIP_INDEX_URL", "https://mirror.example/simple"),
        ("CUDASHIP_TRAIN", "cu130"),
        ("CUDASHIP_CACHE_DIR", "/nonexistent/yet"),
        ("CUDASHIP_LIBCUDA", "/nonexistent/libcuda.so"),  # does not load: "no driver", not bad usage
    ],
)
def test_good_values_pass(name: str, value: str) -> None:
    envvars.validate({name: value})
    assert envvars.get(name, {name: value}) == value


def test_processes_value_is_honoured_as_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    from cudaship.archive.pool import _processes_setting

    monkeypatch.setenv("CUDASHIP_PROCESSES", " ALWAYS ")
    assert _processes_setting(None) is True
    monkeypatch.setenv("CUDASHIP_PROCESSES", "never")
    assert _processes_setting(None) is False
    monkeypatch.setenv("CUDASHIP_PROCESSES", "bogus")
    with pytest.raises(UsageError, match="CUDASHIP_PROCESSES='bogus'"):
        _processes_setting(None)


def test_one_cache_directory_rule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The index cache and toolkit downloads share one directory, by one rule (cudaship.cachedir): the
    variable, else the platform's user cache directory; a relative XDG_CACHE_HOME is ignored (XDG spec)."""
    import sys

    from cudaship import cachedir
    from cudaship.providers.cache import DiskCache
    from cudaship.toolkit import download

    monkeypatch.delenv("CUDASHIP_CACHE_DIR", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert cachedir.root() == Path.home() / ".cache" / "cudaship"
    monkeypatch.setenv("XDG_CACHE_HOME", "/abs/cache")
    assert cachedir.root() == Path("/abs/cache/cudaship")
    assert download.default_cache_dir() == Path("/abs/cache/cudaship/toolkit")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert cachedir.root() == Path.home() / "Library" / "Caches" / "cudaship"
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "Local"))
    assert cachedir.root() == tmp_path / "Local" / "cudaship"
    monkeypatch.setenv("CUDASHIP_CACHE_DIR", str(tmp_path / "c"))
    assert download.default_cache_dir() == tmp_path / "c" / "toolkit"
    # the index client's cache is the same directory's index/ folder
    assert DiskCache(cachedir.root()).root == tmp_path / "c" / "index"
