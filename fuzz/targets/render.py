"""Report rendering (``render/escape.py`` and every renderer): names from the input in every report.

Real records are built once per process from real inputs whose names hold the marker ``FUZZ`` (a wheel
around ``examples/libvecadd.so`` with a member left out of RECORD and a requirement nothing provides, an
AOTInductor package, the library itself, the wheel installed into a site-packages directory, and an export
directory around the package). Each fuzz input is cut at NUL bytes into names (decoded as UTF-8 and as
Latin-1 in turn, so C0, C1, DEL, ESC, line breaks and any Unicode character occur); every ``FUZZ`` in every
string of the records (file names, member names, evidence, reasons) is replaced by the next name, and the
records are rendered by :func:`cudaship.render.table.render` for one of ``inspect``, ``gpus``, ``audit``,
``program inspect``, ``program check`` and ``doctor --env`` (chosen by the input's first byte) in every
format the render table offers, and ``audit``'s GitHub annotations.

Each rendered report must parse back (JSON loads, JUnit XML parses; HTML holds no element and no attribute
the clean report does not; a markdown table keeps its columns and a code span its end) and hold no control
character but line breaks and tabs and no line a CI runner reads as a workflow command
(:func:`cudaship.render.escape.stray`). A report that breaks this raises :class:`Injected` (a finding).
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import cudaship
from cudaship.render import table
from cudaship.render.audit_text import github_annotations
from cudaship.render.escape import stray
from cudaship.render.table import render
from fuzz._harness import Target
from fuzz.targets._scratch import scratch

EXAMPLE = Path(cudaship.__file__).resolve().parents[2] / "examples" / "libvecadd.so"
MARK = "FUZZ"
COMMANDS = ("inspect", "gpus", "audit", "program inspect", "program check", "doctor --env")


class Injected(Exception):
    """A rendered report holds a control character or a workflow command, or does not parse back."""


@dataclass
class _Base:
    records: dict[str, Any]
    tags: dict[tuple[str, str], set[str]]  #: the element names each clean HTML/markdown report holds


_BASE: _Base | None = None


def _wheel(directory: Path) -> Path:
    name = f"{MARK}pkg"
    path = directory / f"{name}-1.0-py3-none-manylinux_2_17_x86_64.whl"
    dist = f"{name}-1.0.dist-info"
    members = {
        f"{name}/lib{MARK}.so": EXAMPLE.read_bytes(),
        f"{name}/{MARK}.py": b"import ctypes\n",
        f"{dist}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nSummary: {MARK}\n"
            f"Requires-Dist: {MARK.lower()}dep\n"
        ).encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: fuzz\nRoot-Is-Purelib: false\n"
        b"Tag: py3-none-manylinux_2_17_x86_64\n",
    }
    record = "".join(f"{n},,\n" for n in members if not n.endswith(".py")) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for member, data in members.items():
            z.writestr(member, data)
        z.writestr(f"{dist}/RECORD", record)
    return path


def _pt2(directory: Path) -> Path:
    path = directory / f"{MARK}.pt2"
    base = f"{MARK}/data/aotinductor/{MARK}"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{MARK}/archive_format", "pt2")
        z.writestr(f"{base}/{MARK}.wrapper.so", EXAMPLE.read_bytes())
        z.writestr(f"{base}/{MARK}.wrapper_metadata.json", json.dumps({"AOTI_DEVICE_KEY": "cuda"}))
    return path


def _site(directory: Path, wheel: Path) -> Path:
    site = directory / "site-packages"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)  # the fuzz target's own wheel: plain names
    return site


def _build() -> _Base:
    from cudaship.analysis.gpus import gpu_report
    from cudaship.checks.engine import audit_wheels
    from cudaship.checks.environment import doctor_env
    from cudaship.checks.table import default_policy
    from cudaship.inspection.program import read_program
    from cudaship.inspection.program_records import Provenance
    from cudaship.inspection.walk import inspect_paths
    from cudaship.program.check import check_program
    from cudaship.program.provenance import write_provenance
    from cudaship.providers.options import ProviderOptions

    root = scratch() / "render"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    wheel = _wheel(root)
    pt2 = _pt2(root)
    library = root / f"lib{MARK}.so"
    library.write_bytes(EXAMPLE.read_bytes())
    export = root / f"{MARK}export"
    export.mkdir()
    shutil.copyfile(pt2, export / "model.pt2")
    from cudaship.hashing import sha256_file

    write_provenance(
        export,
        Provenance(
            package="model.pt2",
            package_sha256=sha256_file(export / "model.pt2"),
            torch_version="2.11.0+cu130",
            cuda_train="13.0",
            device="cuda",
            target_platform="linux-x86_64",
            reference=None,
        ),
    )
    inspected = inspect_paths([str(library), str(wheel), str(pt2)], workers=1)
    providers = ProviderOptions(
        env=None, find_links=(), index_url=None, offline=True, cache_dir=root / "cache"
    )
    records: dict[str, Any] = {
        "inspect": inspected,
        "gpus": gpu_report(inspected, capabilities=None, driver=None),
        "audit": audit_wheels([str(wheel), str(pt2)], default_policy(), workers=1, providers=providers),
        "program inspect": [read_program(pt2)],
        "program check": check_program(export, train="13.0", wheel=None, gpu="9.0", here=False, driver=None),
        "doctor --env": doctor_env([str(_site(root, wheel))], ld_library_path="", system=False),
    }
    tags: dict[tuple[str, str], set[str]] = {}
    for command, record in records.items():
        for fmt in table.formats(command):
            out = render(_command(command), fmt, record)
            if fmt in ("html", "markdown"):
                tags[(command, fmt)] = _elements(out)[0]
    return _Base(records=records, tags=tags)


def _base() -> _Base:
    global _BASE
    if _BASE is None:
        _BASE = _build()
    return _BASE


class _Replacer:
    """Every ``FUZZ`` in every string of a record replaced by the next name (dataclasses rebuilt)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names or [""]
        self.next = 0

    def _name(self, _match: re.Match[str]) -> str:
        name = self.names[self.next % len(self.names)]
        self.next += 1
        return name

    def map(self, value: Any) -> Any:
        import copy
        import dataclasses
        from enum import Enum

        if isinstance(value, Enum):
            return value
        if isinstance(value, str):
            return re.sub(MARK, self._name, value) if MARK in value else value
        if isinstance(value, Path):
            return Path(self.map(str(value)))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out = copy.copy(value)
            for f in dataclasses.fields(value):
                object.__setattr__(out, f.name, self.map(getattr(value, f.name)))
            return out
        if isinstance(value, tuple) and hasattr(value, "_make"):
            return value._make(self.map(v) for v in value)
        if isinstance(value, (tuple, list)):
            return type(value)(self.map(v) for v in value)
        if isinstance(value, dict):
            return {self.map(k): self.map(v) for k, v in value.items()}
        return value


#: Names taken from one input, and bytes per name: what is fuzzed is what a name holds, not how long it is (a
#: name is copied into every place the marker is, hundreds in all: a long one only costs time and memory).
NAMES = 64
NAME_BYTES = 256


def names_of(data: bytes) -> list[str]:
    """The input cut at NUL bytes, each piece decoded as UTF-8 (errors replaced) or Latin-1 in turn."""
    pieces = [p[:NAME_BYTES] for p in data.split(b"\0")[:NAMES]]
    return [p.decode("utf-8", "replace") if i % 2 == 0 else p.decode("latin-1") for i, p in enumerate(pieces)]


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes |= {name for name, _ in attrs}


def _elements(out: str) -> tuple[set[str], set[str]]:
    parser = _Elements()
    parser.feed(out)
    parser.close()
    return parser.tags, parser.attributes


def check_report(command: str, fmt: str, out: str, tags: set[str] | None = None) -> None:
    """Raise :class:`Injected` when ``out`` breaks the contract of the module's docstring."""
    where = f"{command} --format {fmt}"
    left = stray(out)
    if left:
        raise Injected(f"{where}: {left[:3]}")
    if fmt in ("json", "github"):
        try:
            json.loads(out)
        except ValueError as e:
            raise Injected(f"{where}: not JSON: {e}") from None
    elif fmt == "junit":
        try:
            ET.fromstring(out)
        except ET.ParseError as e:
            raise Injected(f"{where}: not XML: {e}") from None
    elif fmt in ("html", "markdown"):
        found, attributes = _elements(out)
        extra = found - (tags or set())
        handlers = {a for a in attributes if a.startswith("on")}
        if extra or handlers:
            raise Injected(f"{where}: elements {sorted(extra)}, handlers {sorted(handlers)}")
        if fmt == "markdown":
            _markdown(where, out)


def _markdown(where: str, out: str) -> None:
    columns = None
    for line in out.splitlines():
        if line.startswith("|"):
            count = len(re.findall(r"(?<!\\)\|", line))
            columns = count if columns is None else columns
            if count != columns:
                raise Injected(f"{where}: a table row with {count} cells boundaries, not {columns}: {line!r}")
        else:
            columns = None
        if line.count("`") % 2:
            raise Injected(f"{where}: a code span without its end: {line!r}")


def _command(name: str) -> table.Command[Any]:
    """The render table's command of that name (the records here are kept by name, untyped)."""
    command = table.COMMANDS[name]
    assert isinstance(command, table.Command)
    return command


def run(data: bytes) -> object:
    """The input's names through one command's renderers, every format (the command by the input's first
    byte: six times the executions for the same time, every command still met every few inputs)."""
    base = _base()
    names = names_of(data)
    rendered = 0
    for command in (COMMANDS[data[0] % len(COMMANDS)],) if data else COMMANDS:
        record = _Replacer(names).map(base.records[command])
        for fmt in table.formats(command):
            out = render(_command(command), fmt, record)
            check_report(command, fmt, out, base.tags.get((command, fmt)))
            rendered += 1
        if command == "audit":
            check_annotations(github_annotations(record))
            rendered += 1
    return rendered


_ANNOTATION = re.compile(r"::(error|warning|notice) title=([^:\n]*)::([^\n]*)")


def check_annotations(out: str) -> None:
    """audit's GitHub annotations: each line one workflow command of ours, its title one line, its data with
    no control character and no command of its own once the runner decodes it."""
    for line in out.splitlines():
        match = _ANNOTATION.fullmatch(line)
        if match is None:
            raise Injected(f"annotation: not one of ours: {line[:200]!r}")
        title, data = match.group(2), match.group(3)
        if "%0A" in title or "%0D" in title:
            raise Injected(f"annotation: a title of several lines: {title[:200]!r}")
        left = stray(title) + stray(data.replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%"))
        if left:
            raise Injected(f"annotation: {left[:3]} in {line[:200]!r}")


TARGET = Target(
    name="render",
    summary="every renderer of inspect, gpus, audit, program inspect/check, doctor --env, with the input's "
    "names in every name of real records; reports parsed back, no control character, no workflow command",
    run=run,
    seed_kinds=("metadata",),
    modules=("render/escape.py", "render/table.py", "render/audit_text.py", "render/audit_markdown.py"),
)
