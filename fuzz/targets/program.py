"""Exported program packages: ``inspection/program.py`` read_program, i.e. ``pt2.py`` read_pt2 (AOTInductor
zip: wrapper library, cubins, metadata) and ``pte.py`` read_pte (ExecuTorch flatbuffer with segments)."""

from __future__ import annotations

from cudaship.inspection.program import read_program
from fuzz._harness import MemoryCeiling, Target
from fuzz.targets._scratch import scratch


class HiddenReaderBug(Exception):
    """A member report of the package carries an exception the dispatch caught."""


def run(data: bytes) -> object:
    directory = scratch() / "program"
    directory.mkdir(exist_ok=True)
    path = directory / ("model.pt2" if data.startswith(b"PK") else "model.pte")
    for old in directory.iterdir():
        old.unlink()
    path.write_bytes(data)
    info = read_program(path)
    for member in info.members:
        error = member.report.error if member.report is not None else None
        if error is not None and error.startswith("cannot read ("):
            raise HiddenReaderBug(f"{member.name}: {error}")
    return info


TARGET = Target(
    name="program",
    summary="read_program on tests/program's real ExecuTorch .pte and a pt2 made around nvcc output",
    run=run,
    seed_kinds=("program",),
    modules=("inspection/program.py", "inspection/pt2.py", "inspection/pte.py"),
    memory=MemoryCeiling(factor=256, constant=32 << 20),
)
