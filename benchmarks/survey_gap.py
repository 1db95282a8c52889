"""How far apart two member ranges may be and still be fetched as one request (``survey.remote.GAP``).

For each wheel given (local files, read through ``file://`` so that only the plan is measured, not a
network), the survey's reader is run once per gap with an empty member cache, and the requests it makes and
the bytes it reads are printed: fewer requests cost fewer round trips, a larger gap reads more bytes that no
row needs. The gap is then chosen by the cost of one request against the bytes it saves (docs/survey.md,
"Fetching").

    python benchmarks/survey_gap.py WHEEL...
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from cudaship.survey.records import SurveyOptions, WheelRef
from cudaship.survey.remote import read_wheel

GAPS = (0, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)


def main(paths: list[str]) -> None:
    print("wheel\tsize\tgap\trequests\tfetched\tnative_or_python_read")
    for name in paths:
        path = Path(name).resolve()
        size = path.stat().st_size
        for gap in GAPS:
            with tempfile.TemporaryDirectory() as cache:
                ref = WheelRef("x", "0", path.name, path.as_uri(), size)
                read = read_wheel(ref, SurveyOptions(cache_dir=cache, audit=False), gap=gap)
            print(f"{path.name}\t{size}\t{gap}\t{read.requests}\t{read.fetched_bytes}\t{len(read.results)}")
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
