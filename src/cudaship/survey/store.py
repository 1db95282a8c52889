"""The survey's dataset on disk, resumable, whichever engine wrote it.

Layout of a survey directory ``DEST`` (docs/survey.md):

- ``DEST/parts/``: the rows, as part files. Every part holds the complete rows of the wheels it names (never
  half a wheel), written whole under a temporary name and renamed into place, so a run stopped at any moment
  leaves only complete parts. A part is ``<run>-<n>.parquet`` (the engine's Parquet writer) or
  ``<run>-<n>.jsonl`` (JSON Lines, one row per line): readers take both.
- ``DEST/survey.json``: what was asked (sources, filters, options) and each run's start, end and counts
  (wheels selected, skipped as done, surveyed, failed; bytes fetched against the index's size of the
  selected wheels).
- ``DEST/rows.jsonl`` and ``DEST/rows.parquet`` (pyarrow): the consolidated dataset, every part's rows with
  one set of rows per wheel (a wheel surveyed again, ``--retry-errors``, takes the rows of its latest part),
  written at the end of a run; :func:`read_rows` gives the same rows from the parts at any time.

A wheel is done when a part holds a row with its ``wheel_key``; a second run over the same sources skips
those and fetches only what is new. A part that cannot be read (damaged, or not the survey's) is skipped and
named (:attr:`Done.damaged`): its wheels are surveyed again. The Parquet schema is :func:`arrow_schema`,
built from :data:`~cudaship.survey.records.ROW_TYPES`; pyarrow is imported only here and only when called.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudaship.errors import CudashipError, UsageError
from cudaship.safe_write import new_file, write_text
from cudaship.survey.records import ROW_FIELDS, ROW_TYPES, WheelOutcome, WheelRef, empty_row

PARTS = "parts"
MANIFEST = "survey.json"
ROWS_JSONL = "rows.jsonl"
ROWS_PARQUET = "rows.parquet"
#: what the manifest says it is; a reader refuses another
MANIFEST_FORMAT = "cudaship-survey/1"
#: what installs pyarrow (Parquet parts and ``rows.parquet``)
SURVEY_EXTRA = "pip install 'cudaship[survey]'"
#: a part is written when this many wheels are complete, or :data:`PART_SECONDS` after the last one
PART_WHEELS = 64
PART_SECONDS = 30.0
#: most bytes of one part read back (a part of 64 wheels is a few hundred KB)
MAX_PART_BYTES = 1 << 30


class StoreError(CudashipError):
    """A survey directory, part or manifest cannot be read or written."""


def arrow_schema() -> Any:
    """The rows' Parquet schema (a ``pyarrow.Schema``), column for column :data:`ROW_TYPES`."""
    import pyarrow as pa

    arch = pa.struct([("arch", pa.string()), ("kind", pa.string()), ("bytes", pa.int64())])
    types = {
        "str": pa.string(),
        "int": pa.int64(),
        "bool": pa.bool_(),
        "list[str]": pa.list_(pa.string()),
        "list[arch]": pa.list_(arch),
    }
    return pa.schema([(name, types[kind]) for name, kind in ROW_TYPES])


def has_pyarrow() -> bool:
    """Whether pyarrow can be imported (the ``survey`` extra)."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def require_pyarrow(what: str) -> None:
    """UsageError (exit 2, one line naming the extra) when pyarrow is missing and ``what`` needs it."""
    if not has_pyarrow():
        raise UsageError(f"{what} needs pyarrow, which is not installed: {SURVEY_EXTRA}")


# --- rows -------------------------------------------------------------------------------------------------


def wheel_row(ref: WheelRef, error: str | None = None) -> dict[str, Any]:
    """A row with the wheel's own columns from ``ref`` and the rest None (``error``: why it was not read)."""
    row = empty_row()
    row.update(
        wheel_key=ref.key,
        project=ref.project,
        version=ref.version,
        filename=ref.filename,
        url=ref.url,
        wheel_sha256=ref.sha256,
        wheel_size=ref.size,
        upload_time=ref.upload_time,
        error=error,
    )
    return row


def outcome_rows(outcome: WheelOutcome) -> list[dict[str, Any]]:
    """The rows a part holds for ``outcome``: its rows with the wheel's key, or one error row when it has none
    (a wheel is done only when a part holds a row of it)."""
    ref = outcome.ref
    rows = outcome.rows or [wheel_row(ref, outcome.error or "the survey gave no row for this wheel")]
    out = []
    for row in rows:
        full = empty_row()
        full.update({k: v for k, v in row.items() if k in full})
        full["wheel_key"] = ref.key
        out.append(full)
    return out


def wheel_failed(rows: list[dict[str, Any]]) -> bool:
    """Whether a wheel's rows say it could not be read at all: one row, no library, an error."""
    return len(rows) == 1 and rows[0].get("library") is None and rows[0].get("error") is not None


# --- parts ------------------------------------------------------------------------------------------------


def new_run_id(now: float | None = None) -> str:
    """A run's name: its UTC start time to the microsecond, then random digits. Parts sort by name, so the
    parts of a later run sort after (its rows of a wheel surveyed again replace the earlier ones); two runs
    started within the same second still sort in order."""
    when = dt.datetime.fromtimestamp(time.time() if now is None else now, dt.timezone.utc)
    return f"{when.strftime('%Y%m%dT%H%M%S.%fZ')}-{secrets.token_hex(3)}"


def survey_dir(dest: str | os.PathLike[str]) -> Path:
    """``dest`` and its ``parts/`` directory, created when missing; StoreError when that cannot be."""
    root = Path(dest)
    if root.exists() and not root.is_dir():
        raise StoreError("not a directory (a survey directory is one)", path=str(dest))
    try:
        (root / PARTS).mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StoreError("parts is not a directory (a survey directory holds one)", path=str(dest)) from None
    except OSError as e:
        raise StoreError(f"cannot create the survey directory: {e.strerror or e}", path=str(dest)) from None
    if not os.access(root / PARTS, os.W_OK | os.X_OK):
        raise StoreError("the survey directory is not writable", path=str(root / PARTS))
    return root


def write_part(
    dest: str | os.PathLike[str], run: str, n: int, outcomes: Iterable[WheelOutcome], fmt: str = "jsonl"
) -> Path:
    """Write the rows of ``outcomes`` (complete wheels) as the part ``<run>-<n>.<fmt>`` (``jsonl`` or
    ``parquet``), whole under a temporary name, then renamed into place."""
    rows = [row for outcome in outcomes for row in outcome_rows(outcome)]
    return write_rows(Path(dest) / PARTS / f"{run}-{n:05d}.{fmt}", rows)


def write_rows(target: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` as JSON Lines or Parquet (by ``target``'s suffix), complete or not at all."""
    if target.suffix == ".parquet":
        require_pyarrow(f"{target.name}: a Parquet file")
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist(rows, schema=arrow_schema())
        with new_file(target, error=StoreError) as out:
            pq.write_table(table, out.file)
            out.place()
        return target
    with new_file(target, error=StoreError) as out:
        try:
            for row in rows:
                out.file.write(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
        except OSError as e:
            raise StoreError(f"cannot write: {e.strerror or e}", path=str(target)) from None
        out.place()
    return target


def read_part(path: Path) -> list[dict[str, Any]]:
    """The rows of one part; StoreError naming it when it cannot be read or holds what is not rows."""
    try:
        if path.stat().st_size > MAX_PART_BYTES:
            raise StoreError(f"larger than {MAX_PART_BYTES >> 20} MiB", path=str(path))
        if path.suffix == ".parquet":
            require_pyarrow(f"{path.name}: a Parquet part")
            import pyarrow.parquet as pq

            try:
                rows = list(pq.read_table(path).to_pylist())
            except Exception as e:  # pyarrow's errors for a damaged file are several types
                raise StoreError(
                    f"not a readable Parquet file ({type(e).__name__})", path=str(path)
                ) from None
        else:
            rows = []
            with path.open("rb") as f:
                for number, line in enumerate(f, 1):
                    try:
                        row = json.loads(line)
                    except ValueError:
                        raise StoreError(f"line {number} is not JSON", path=str(path)) from None
                    rows.append(row)
    except OSError as e:
        raise StoreError(f"cannot read: {e.strerror or e}", path=str(path)) from None
    for number, row in enumerate(rows, 1):
        if not isinstance(row, dict) or tuple(row) != ROW_FIELDS or not isinstance(row.get("wheel_key"), str):
            raise StoreError(f"row {number} is not a survey row", path=str(path))
    return rows


def parts(dest: str | os.PathLike[str]) -> list[Path]:
    """The parts of ``dest``, oldest run first (by name: runs are named by their start)."""
    directory = Path(dest) / PARTS
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise StoreError(f"cannot read: {e.strerror or e}", path=str(directory)) from None
    return [
        directory / n for n in sorted(names) if n.endswith((".jsonl", ".parquet")) and not n.startswith(".")
    ]


@dataclass
class Done:
    """What the parts of a survey directory hold."""

    keys: set[str] = field(default_factory=set)  #: wheels some readable part holds
    failed: set[str] = field(default_factory=set)  #: of those, wheels whose latest rows hold a wheel error
    damaged: list[str] = field(default_factory=list)  #: parts skipped, one line each (their wheels: not done)
    parts: int = 0  #: readable parts
    rows: int = 0


def _latest_rows(dest: str | os.PathLike[str], done: Done) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(wheel key, its rows) per wheel, the latest part's rows of each; fills ``done``."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for path in parts(dest):
        try:
            rows = read_part(path)
        except CudashipError as e:
            done.damaged.append(f"{e}; skipped (its wheels are surveyed again)")
            continue
        done.parts += 1
        grouped: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            grouped.setdefault(row["wheel_key"], []).append(row)
        by_key.update(grouped)  # a later part's rows of a wheel replace the earlier ones
    for key, rows in by_key.items():
        done.keys.add(key)
        done.rows += len(rows)
        if wheel_failed(rows):
            done.failed.add(key)
        yield key, rows


def scan(dest: str | os.PathLike[str]) -> Done:
    """What the parts of ``dest`` hold (damaged parts named, not raised)."""
    done = Done()
    for _ in _latest_rows(dest, done):
        pass
    return done


def done_keys(dest: str | os.PathLike[str], *, retry_errors: bool = False) -> set[str]:
    """Keys of the wheels a complete part holds (``retry_errors``: less those whose rows say the wheel could
    not be read). A damaged part is skipped: :func:`scan` names it."""
    done = scan(dest)
    return done.keys - done.failed if retry_errors else done.keys


def _row_order(row: dict[str, Any]) -> tuple[str, str, str, str]:
    return (row["project"] or "", row["filename"] or "", row["wheel_key"], row["library"] or "")


def read_rows(dest: str | os.PathLike[str], done: Done | None = None) -> list[dict[str, Any]]:
    """The dataset's rows from every readable part (one set of rows per wheel: its latest part's), sorted by
    project, file name and library. ``done`` (optional) is filled as :func:`scan` fills it."""
    rows = [row for _key, rows in _latest_rows(dest, done or Done()) for row in rows]
    rows.sort(key=_row_order)
    return rows


@dataclass(frozen=True)
class Consolidated:
    wheels: int
    rows: int
    libraries: int  #: rows naming a library
    failed: int  #: wheels that could not be read
    files: tuple[str, ...]  #: the files written
    damaged: tuple[str, ...]


def consolidate(dest: str | os.PathLike[str], *, parquet: bool | None = None) -> Consolidated:
    """Write ``DEST/rows.jsonl`` and (``parquet``; None: when pyarrow is installed) ``DEST/rows.parquet`` from
    every part."""
    done = Done()
    rows = read_rows(dest, done)
    root = Path(dest)
    files = [write_rows(root / ROWS_JSONL, rows)]
    if parquet or (parquet is None and has_pyarrow()):
        files.append(write_rows(root / ROWS_PARQUET, rows))
    return Consolidated(
        wheels=len(done.keys),
        rows=len(rows),
        libraries=sum(1 for r in rows if r["library"] is not None),
        failed=len(done.failed),
        files=tuple(str(f) for f in files),
        damaged=tuple(done.damaged),
    )


class PartWriter:
    """Complete wheels gathered and written as parts of one run: every ``every_wheels`` wheels or
    ``every_s`` seconds after the first wheel not yet written, whichever comes first, and at :meth:`flush`."""

    def __init__(
        self,
        dest: str | os.PathLike[str],
        run: str,
        *,
        fmt: str = "jsonl",
        every_wheels: int = PART_WHEELS,
        every_s: float = PART_SECONDS,
    ) -> None:
        self.dest = Path(dest)
        self.run = run
        self.fmt = fmt
        self.every_wheels = max(1, every_wheels)
        self.every_s = every_s
        self.pending: list[WheelOutcome] = []
        self.since: float | None = None
        self.parts = 0  #: parts written
        self.wheels = 0  #: wheels written

    def add(self, outcome: WheelOutcome) -> Path | None:
        """Keep ``outcome``; write a part when one is due (its path, else None)."""
        if not self.pending:
            self.since = time.monotonic()
        self.pending.append(outcome)
        return self.flush() if self.due() else None

    def due(self) -> bool:
        if not self.pending:
            return False
        return len(self.pending) >= self.every_wheels or (
            self.since is not None and time.monotonic() - self.since >= self.every_s
        )

    def flush(self) -> Path | None:
        """Write what is kept as one part (its path; None when nothing is kept)."""
        if not self.pending:
            return None
        path = write_part(self.dest, self.run, self.parts, self.pending, self.fmt)
        self.parts += 1
        self.wheels += len(self.pending)
        self.pending = []
        self.since = None
        return path


# --- the manifest -----------------------------------------------------------------------------------------


def now_text() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_manifest(dest: str | os.PathLike[str]) -> dict[str, Any]:
    """``DEST/survey.json``, or a new manifest when there is none; StoreError when it is not one."""
    path = Path(dest) / MANIFEST
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {"format": MANIFEST_FORMAT, "runs": []}
    except OSError as e:
        raise StoreError(f"cannot read: {e.strerror or e}", path=str(path)) from None
    try:
        manifest = json.loads(data)
    except ValueError:
        raise StoreError(
            "not JSON (move it away to start the survey's record anew)", path=str(path)
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise StoreError(f"not a survey manifest ({MANIFEST_FORMAT})", path=str(path))
    if not isinstance(manifest.get("runs"), list):
        manifest["runs"] = []
    return manifest


def write_manifest(dest: str | os.PathLike[str], manifest: dict[str, Any]) -> None:
    """Write ``DEST/survey.json`` whole (renamed into place)."""
    write_text(
        Path(dest) / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", error=StoreError
    )


def update_run(dest: str | os.PathLike[str], record: dict[str, Any], **top: Any) -> dict[str, Any]:
    """Put the run ``record`` (by its ``run``) into the manifest, with the top-level keys ``top``; written."""
    manifest = read_manifest(dest)
    manifest.update(top)
    runs = [r for r in manifest["runs"] if not (isinstance(r, dict) and r.get("run") == record["run"])]
    manifest["runs"] = [*runs, record]
    write_manifest(dest, manifest)
    return manifest
