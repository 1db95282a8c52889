"""Policy loading: the example policies validate; every mistake is a PolicyError naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaship.checks.policy import expand_template, glob_match, name_match
from cudaship.checks.table import default_families, family_names, load_policy
from cudaship.config import load_config
from cudaship.errors import PolicyError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"


@pytest.mark.parametrize("platform", ["windows", "linux"], ids=["windows", "linux"])
def test_example_policies_load(platform: str) -> None:
    policy = load_policy(load_config(EXAMPLES / f"{platform}.toml"))
    # every family but load, which runs only with audit --load (it installs and runs the wheel)
    assert set(policy.families) == set(family_names()) - {"load"}
    assert policy.archs_table is not None
    assert policy.arch_table().lookup("cu132", "x86_64").sass_names()[-1] == "sm_120"
    assert {c.name for c in policy.components} == {"cuda_backend", "cuda_allocator", "aoti_shims"}


def test_no_configuration_is_the_default(tmp_path: Path) -> None:
    policy = load_policy(load_config(start=tmp_path))
    assert policy.is_default
    assert policy.families == default_families()
    assert policy.source is None


def test_pyproject_tool_table_is_found(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[tool.cudaship.audit.collisions]\nsoname_matches_filename = ["lib/*.so"]\n'
    )
    policy = load_policy(load_config(start=tmp_path))
    assert policy.source == str(tmp_path / "pyproject.toml")
    assert policy.collisions.soname_matches_filename == ("lib/*.so",)
    assert "collisions" in policy.configured


def test_cudaship_toml_is_found(tmp_path: Path) -> None:
    (tmp_path / "cudaship.toml").write_text('[audit]\nskip = ["record"]\n')
    policy = load_policy(load_config(start=tmp_path))
    assert "record" not in policy.families
    assert policy.source == str(tmp_path / "cudaship.toml")


BAD = [
    ("audit = 3", "audit: must be a table"),
    ("[audit]\nbogus = 1", "audit.bogus: unknown key"),
    ("[audit.ships]\nrequired = 5", "audit.ships.required: must be a string or a list of strings"),
    ("[audit.ships]\nrequired = ['/abs/path']", "audit.ships.required[0]"),
    ("[audit.ships.import_libraries]\n'a.dll' = 'a.dll'", "the key must be a .lib path"),
    ("[[audit.forbidden_imports]]\npatterns = ['x']", "audit.forbidden_imports[0].libraries: is required"),
    ("[[audit.forbidden_imports]]\nlibraries = ['*']", "audit.forbidden_imports[0].patterns: is required"),
    ("[[audit.forbidden_imports]]\nlibraries = ['*']\nno_cuda = 'yes'", "no_cuda: must be true or false"),
    (
        "[[audit.required_imports]]\nlibraries = ['*']\npatterns=['a']\nno_cuda = true",
        "required_imports[0].no_cuda",
    ),
    ("[audit.archs]\nptx = 'all'", "audit.archs.ptx: must be one of newest, none"),
    ("[audit.requirements]\nlinux = ['nvidia-x>={minor}']", "unknown placeholder {minor}"),
    ("[audit.requirements]\nsolaris = []", "audit.requirements.solaris: unknown key"),
    ("[audit.ownership]\n", "audit.ownership.components: must be a table"),
    ("[audit.ownership.components.a]\nsentinels = ['s']", "audit.ownership.components.a.owner: is required"),
    ("[audit.ownership.components.a]\nowner = 'o'", "audit.ownership.components.a.sentinels: is required"),
    ("[audit.closure]\nunused_imports = 1", "audit.closure.unused_imports: must be true or false"),
    ("[audit]\nchecks = ['speed']", "audit.checks[0]: unknown check family 'speed'"),
    ("[archs.cu132]\nx86_64 = 'sm_999'", "archs.cu132.x86_64"),
    ("[archs]\nbanana = {}", "archs.banana"),
]


@pytest.mark.parametrize(
    ("text", "message"),
    BAD,
    ids=[m.split(":")[0].replace(" ", "_") + f"-{i}" for i, (_, m) in enumerate(BAD)],
)
def test_invalid_policy_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "cudaship.toml"
    path.write_text(text + "\n")
    with pytest.raises(PolicyError) as info:
        load_policy(load_config(path))
    assert message in str(info.value)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_invalid_toml_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cudaship.toml"
    path.write_text("[audit\n")
    with pytest.raises(PolicyError, match="invalid TOML"):
        load_policy(load_config(path))


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/*.dll", "a/b/c.dll", True),
        ("**/*.dll", "c.dll", True),
        ("*.dll", "a/c.dll", False),
        ("lib/*.so", "lib/libx.so", True),
        ("lib/*.so", "lib/sub/libx.so", False),
        (
            "executorch/extension/pybindings/_C.*.so",
            "executorch/extension/pybindings/_C.cpython-312-x86_64-linux-gnu.so",
            True,
        ),
        ("a/**", "a/b/c", True),
        ("a/?.txt", "a/bb.txt", False),
        ("[ab].so", "a.so", True),
    ],
    ids=["deep", "deep-root", "star-no-slash", "dir", "dir-not-deeper", "pyext", "tail", "question", "class"],
)
def test_glob_match(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(pattern, path) is expected


def test_name_match_is_case_insensitive() -> None:
    assert name_match(["cudart64_*.dll"], "CUDART64_13.DLL") == "cudart64_*.dll"
    assert name_match(["nvcuda.dll"], "C:/Windows/System32/NVCUDA.dll") == "nvcuda.dll"
    assert name_match(["libcudart.so.*"], "libcublas.so.13") is None


@pytest.mark.parametrize(
    ("major", "expected"),
    [(12, "nvidia-cuda-runtime-cu12>=12,<13"), (13, "nvidia-cuda-runtime>=13,<14")],
    ids=["cu12-suffix", "cu13-unsuffixed"],
)
def test_template_expansion(major: int, expected: str) -> None:
    assert expand_template("nvidia-cuda-runtime{cu}>={major},<{next_major}", major) == expected
