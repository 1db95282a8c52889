"""Writing ``provenance.json`` (``program export``): what a program was exported with. Read by
:mod:`cudaship.inspection.provenance` (the schema, the strict reading and the file name are there).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cudaship.errors import ProgramError
from cudaship.inspection.program_records import Provenance
from cudaship.inspection.provenance import PROVENANCE_FILE
from cudaship.safe_write import write_text


def provenance_to_json(prov: Provenance) -> str:
    data: dict[str, Any] = {"schema": prov.schema}
    data.update({k: v for k, v in asdict(prov).items() if k != "schema"})
    data["device_code_archs"] = list(prov.device_code_archs)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_provenance(directory: Path, prov: Provenance) -> Path:
    target = directory / PROVENANCE_FILE

    write_text(target, provenance_to_json(prov), error=ProgramError)
    return target
