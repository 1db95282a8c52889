"""The layer rules of docs/design.md, enforced (issue 26 step 5).

The layers table in docs/design.md has a column "may not import": for each package, the packages and modules
of cudaship its modules may not import. This test reads that column (so the document and the rule are one
thing), walks every module under ``src/cudaship`` with ``ast`` and fails naming ``file:line`` for every import
the column forbids: module-level, inside functions and under ``if TYPE_CHECKING:`` alike (an import that only
type-checks still ties the layers together, and a function-level import hides a cycle no better).

The column's words:

- ``archive/``: the package ``cudaship.archive`` and every module under it;
- ``wheel/metadata``: the module ``cudaship.wheel.metadata`` (or package, with what is under it);
- ``config``: the top-level module ``cudaship.config``;
- ``*``: anything of cudaship outside the row's own package.

Every package under ``src/cudaship`` has a row (a new package is a new row); every top-level module follows
the row "top-level modules", except ``__main__``, which is part of ``cli/``.
"""

from __future__ import annotations

import ast
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
DESIGN = REPO / "docs" / "design.md"

#: the row of the modules directly in ``src/cudaship`` (its first cell starts with these words)
TOP_LEVEL = "top-level modules"
#: top-level modules that belong to a package's row instead
TOP_LEVEL_OWNER = {"__main__": "cli"}


@dataclass(frozen=True)
class Rule:
    layer: str  #: the row's package, ``""`` for the top-level modules
    forbidden: tuple[str, ...]  #: the column's words as written: ``archive/``, ``wheel/metadata``, ``*``


@dataclass(frozen=True)
class Violation:
    path: Path
    line: int
    module: str
    imported: str
    rule: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.module} imports {self.imported} ({self.rule})"


def read_rules(design: Path = DESIGN) -> dict[str, Rule]:
    """The layers table's "may not import" column: row package (``"binary"``; ``""``: top-level) -> rule."""
    rows = [line for line in design.read_text().splitlines() if line.startswith("|")]
    header = next(i for i, line in enumerate(rows) if "may not import" in line)
    cells = [c.strip() for c in rows[header].strip("|").split("|")]
    column = cells.index("may not import")
    rules = {}
    for line in rows[header + 2 :]:
        row = [c.strip() for c in line.strip("|").split("|")]
        if len(row) != len(cells):
            break
        if row[0].startswith(TOP_LEVEL):
            layer = ""
        else:
            match = re.fullmatch(r"`(\w+)/`", row[0])
            assert match, f"{design.name}: a layers row names no package: {row[0]!r}"
            layer = match.group(1)
        words = re.findall(r"`([^`]+)`", row[column])
        assert all(re.fullmatch(r"\*|\w+(/\w+)*/?", w) for w in words), f"{row[0]}: {row[column]!r}"
        rules[layer] = Rule(layer, tuple(words))
    return rules


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> list[tuple[int, str]]:
    """(line, dotted name) of every module an ``import`` or ``from ... import`` anywhere in ``tree`` names;
    ``from a import b`` names ``a`` and, where ``a.b`` is a module, ``a.b``."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            found += [
                (node.lineno, f"{target}.{alias.name}")
                for alias in node.names
                if f"{target}.{alias.name}" in known
            ]
    return found


def _forbids(rule: Rule, layer_module: str, imported: str) -> str | None:
    """The word of ``rule`` that forbids ``imported`` (a dotted name under cudaship), or None."""
    inner = imported.split(".", 1)[1] if "." in imported else ""
    own = f"cudaship.{rule.layer}" if rule.layer else layer_module
    for word in rule.forbidden:
        if word == "*":
            if imported != own and not imported.startswith(own + "."):
                return word
        else:
            dotted = word.rstrip("/").replace("/", ".")
            if inner == dotted or inner.startswith(dotted + "."):
                return word
    return None


def violations(root: Path = SRC, rules: dict[str, Rule] | None = None) -> list[Violation]:
    """Every import under ``root/cudaship`` its layer's rule forbids."""
    rules = read_rules() if rules is None else rules
    package_root = root / "cudaship"
    files = sorted(package_root.rglob("*.py"))
    known = {_module_name(f, root) for f in files}
    found = []
    for path in files:
        module = _module_name(path, root)
        parts = module.split(".")
        if path.parent == package_root:
            layer = "" if path.name == "__init__.py" else TOP_LEVEL_OWNER.get(parts[1], "")
        else:
            layer = parts[1]
        assert layer in rules, f"{path}: the package {layer}/ has no row in the layers table of {DESIGN.name}"
        rule = rules[layer]
        tree = ast.parse(path.read_text(), str(path))
        for line, imported in _imports(tree, module, path.name == "__init__.py", known):
            if imported != "cudaship" and not imported.startswith("cudaship."):
                continue
            word = _forbids(rule, module, imported)
            if word is not None:
                what = f"{rule.layer}/" if rule.layer else TOP_LEVEL
                shown = path.relative_to(REPO) if REPO in path.parents else path
                found.append(Violation(shown, line, module, imported, f"{what} may not import {word}"))
    return found


# -- the tests ----------------------------------------------------------------------------------------------


#: Violations being removed on other branches of issue 26, by (file, imported module): owner. Empty once those
#: branches are merged; an entry that no longer occurs fails below, so the list only shrinks.


def test_no_layer_imports_what_design_forbids() -> None:
    found = violations()
    assert not found, f"{len(found)} imports the layers table forbids:\n" + "\n".join(map(str, found))


def test_every_package_has_a_row() -> None:
    rules = read_rules()
    packages = {p.name for p in (SRC / "cudaship").iterdir() if (p / "__init__.py").is_file()}
    assert packages <= set(rules), f"packages without a row: {sorted(packages - set(rules))}"
    assert set(rules) - {""} <= packages, f"rows without a package: {sorted(set(rules) - {''} - packages)}"


def test_nothing_but_cli_imports_cli() -> None:
    for layer, rule in read_rules().items():
        if layer != "cli":
            assert {"*", "cli/"} & set(rule.forbidden), f"the row {layer or TOP_LEVEL} allows cli/"


@pytest.mark.parametrize(
    ("layer", "words"),
    [
        ("records", {"*"}),
        ("checks", {"archive/", "wheel/metadata", "wheel/pyloads", "wheel/archive", "render/", "cli/"}),
        ("render", {"cli/", "binary/", "archive/", "wheel/metadata", "wheel/pyloads"}),
        ("ci", {"render/"}),
        ("binary", {"knowledge/", "checks/", "render/", "cli/"}),
        ("archive", {"knowledge/", "checks/", "render/", "cli/"}),
        ("knowledge", {"config", "binary/", "archive/", "wheel/", "checks/", "render/", "cli/"}),
    ],
)
def test_the_rules_issue_26_names_are_in_the_table(layer: str, words: set[str]) -> None:
    assert words <= set(read_rules()[layer].forbidden)


_PLANTED = """\
from typing import TYPE_CHECKING

from cudaship.records.files import FileReport

if TYPE_CHECKING:
    from cudaship.render.table import render


def scan() -> None:
    from cudaship.archive import zip  # a function-level import counts too
    import cudaship.wheel.metadata
"""


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / "cudaship" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "cudaship" / name).write_text(text)
    return tmp_path


def test_the_checker_reports_each_planted_import_by_file_and_line(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "archive/__init__.py": "",
            "archive/zip.py": "",
            "checks/__init__.py": "",
            "checks/planted.py": _PLANTED,
            "records/__init__.py": "",
            "records/files.py": "from cudaship import errors\nFileReport = object\n",
            "errors.py": "",
            "render/__init__.py": "",
            "render/table.py": "from cudaship.cli.main import cli\n",
            "cli/__init__.py": "",
            "cli/main.py": "from cudaship.render.table import render\n",
            "wheel/__init__.py": "",
            "wheel/metadata.py": "",
        },
    )
    shown = sorted((v.path.as_posix().split("cudaship/", 1)[1], v.line, v.imported) for v in violations(root))
    assert shown == [
        ("checks/planted.py", 6, "cudaship.render.table"),
        ("checks/planted.py", 10, "cudaship.archive"),
        ("checks/planted.py", 10, "cudaship.archive.zip"),
        ("checks/planted.py", 11, "cudaship.wheel.metadata"),
        ("records/files.py", 1, "cudaship"),
        ("records/files.py", 1, "cudaship.errors"),
        ("render/table.py", 1, "cudaship.cli.main"),
    ]


def test_a_forbidden_import_added_to_the_real_tree_fails(tmp_path: Path) -> None:
    """The acceptance of issue 26: on a copy of src/, one planted import from checks/ to archive/ is the one
    new violation, named by file and line."""
    shutil.copytree(SRC / "cudaship", tmp_path / "cudaship", ignore=shutil.ignore_patterns("__pycache__"))
    before = {(v.path.name, v.imported) for v in violations(tmp_path)}
    engine = tmp_path / "cudaship" / "checks" / "engine.py"
    lines = engine.read_text().splitlines()
    planted = ["", "", "def _planted() -> None:", "    from cudaship.archive.zip import ZipDirectory", ""]
    engine.write_text("\n".join([*lines, *planted]))
    new = [v for v in violations(tmp_path) if (v.path.name, v.imported) not in before]
    assert [(v.path.name, v.line, v.imported, v.rule) for v in new] == [
        ("engine.py", len(lines) + 4, "cudaship.archive.zip", "checks/ may not import archive/")
    ]
