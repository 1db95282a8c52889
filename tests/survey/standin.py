"""A stand-in for :func:`cudaship.survey.work.survey_wheel` (written on another branch): it fetches the whole
wheel (HTTP through cudaship's client, so the local index counts it; ``file://`` from disk) and gives one row
per native member, or one row without a library. What it does besides is read from ``standin.json`` in
``options.cache_dir`` (worker processes come from a fork server: the test's environment would not reach
them): ``delay`` seconds per wheel, a ``log`` file a line per wheel surveyed, and file names that fail on the
network (``transient_once``, ``transient``), end their worker process (``crash_once``, ``crash``) or cannot be
read (``broken``)."""

from __future__ import annotations

import io
import json
import os
import time
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from cudaship.http import Unavailable
from cudaship.providers.http import Client
from cudaship.survey.records import SurveyOptions, WheelOutcome, WheelRef
from cudaship.survey.store import wheel_row

NATIVE = (".so", ".dll", ".pyd", ".dylib", ".ptx", ".cubin", ".fatbin")


def _config(options: SurveyOptions) -> dict[str, Any]:
    path = Path(options.cache_dir) / "standin.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _first_time(options: SurveyOptions, what: str, ref: WheelRef) -> bool:
    """True the first time ``what`` happens to ``ref`` (a marker file in the cache directory)."""
    marker = Path(options.cache_dir) / f"{what}-{ref.filename}"
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def survey_wheel(ref: WheelRef, options: SurveyOptions) -> WheelOutcome:
    config = _config(options)
    if config.get("log"):
        with open(config["log"], "a") as f:
            f.write(f"{ref.key} {os.getpid()}\n")
    time.sleep(float(config.get("delay", 0)))
    name = ref.filename
    if name in config.get("crash", []) or (
        name in config.get("crash_once", []) and _first_time(options, "crash", ref)
    ):
        os._exit(3)
    if name in config.get("transient", []) or (
        name in config.get("transient_once", []) and _first_time(options, "transient", ref)
    ):
        error = "connection reset (stand-in)"
        return WheelOutcome(ref, [wheel_row(ref, error)], error=error, transient=True)
    if name in config.get("broken", []):
        return WheelOutcome(ref, [wheel_row(ref, "not a zip file")], error="not a zip file")
    try:
        if ref.url.startswith("file:"):
            data = Path(urllib.request.url2pathname(urllib.parse.urlsplit(ref.url).path)).read_bytes()
        else:
            data = Client().get(ref.url, hosts=options.hosts).body
    except Unavailable as e:
        return WheelOutcome(ref, [wheel_row(ref, str(e))], error=str(e), transient=e.transient)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        native = sorted(n for n in zf.namelist() if n.endswith(NATIVE))
    rows = []
    for member in native:
        row = wheel_row(ref)
        row.update(
            library=member, sass=["sm_90"], arch_bytes=[{"arch": "sm_90", "kind": "sass", "bytes": 10}]
        )
        rows.append(row)
    return WheelOutcome(ref, rows or [wheel_row(ref)], fetched_bytes=len(data), read_members=len(native))


def configure(cache_dir: Path, **config: Any) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / "standin.json").write_text(json.dumps(config))
