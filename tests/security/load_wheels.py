"""Planted wheels for the ``audit --load`` containment tests (issue 30, class 5): packages whose import
reports what it can see, leaves a grandchild behind, allocates memory or is one of thousands of top-level
modules, and a requirement that exists only as an sdist whose build backend leaves a mark. Everything is
built in the test and installed offline (``--offline --find-links``)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.oracle.builders import build_wheel

REPO = Path(__file__).resolve().parents[2]
#: caller's variables that no child may see
SECRETS = {
    "GITHUB_TOKEN": "ghp_planted",
    "AWS_SECRET_ACCESS_KEY": "planted",
    "TWINE_PASSWORD": "planted",
    "NPM_TOKEN": "planted",
    "MY_SERVICE_API_KEY": "planted",
    "DB_PASSWORD": "planted",
    "PIP_PASSWORD": "planted",
}

SPY = """import json, os
_report = {report!r}
with open(os.path.join(os.path.expanduser("~"), ".spy-was-here"), "w") as f:
    f.write("x")
with open(_report, "a") as f:
    f.write(json.dumps({{"keys": sorted(os.environ), "values": sorted(os.environ.values()),
        "home": os.path.expanduser("~"), "cwd": os.getcwd(), "tmp": os.environ.get("TMPDIR")}}) + "\\n")
"""

# the import forks; the child calls setsid, forks again (the grandchild keeps the inherited stderr open),
# writes its pid and sleeps; the import returns at once
DAEMON = """import os, sys, time
_pids = {pids!r}
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(os.path.join(_pids, str(os.getpid())), "w") as f:
            f.write(str(os.getpid()))
        sys.stderr.write("daemon started\\n")
        sys.stderr.flush()
        time.sleep(3600)
    os._exit(0)
"""

HOG = """data = bytearray(2 << 30)  # 2 GiB
"""

# one marker file per interpreter: named by its pid, so imports in one interpreter share one
MARKER = """import os
open(os.path.join({markers!r}, str(os.getpid())), "a").close()
"""

SLEEPER = """import time
time.sleep(3600)
"""


def pure_wheel(directory: Path, name: str, files: dict[str, str], requires: tuple[str, ...] = ()) -> Path:
    return build_wheel(
        directory,
        name,
        "1.0",
        {k: v.encode() for k, v in files.items()},
        requires=requires,
        tag="py3-none-any",
        top_level=sorted({k.split("/", 1)[0].removesuffix(".py") for k in files}),
    )


def sdist_only(directory: Path, name: str, mark: Path) -> Path:
    """``name-1.0.tar.gz`` with an in-tree build backend (no build requirement, so pip runs it offline) that
    writes ``mark`` (and the environment keys it saw) whenever pip asks it anything."""
    backend = f"""import json, os
def _mark():
    with open({str(mark)!r}, "a") as f:
        f.write(json.dumps(sorted(os.environ)) + "\\n")
def get_requires_for_build_wheel(config_settings=None):
    _mark()
    return []
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _mark()
    raise RuntimeError("planted backend: no wheel from here")
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _mark()
    raise RuntimeError("planted backend: no wheel from here")
"""
    files = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
        "backend.py": backend,
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for member, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-1.0/{member}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def run_load(
    wheel: Path, wheelhouse: Path, *options: str, timeout: float = 240, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """``cudaship audit --load`` of ``wheel`` in a fresh process (its JSON report), offline, with the planted
    secrets in its environment. ``subprocess.TimeoutExpired`` when it does not return within ``timeout``."""
    environ = dict(os.environ, **SECRETS, **(env or {}))
    environ["PYTHONPATH"] = str(REPO / "src")
    environ.pop("GITHUB_ACTIONS", None)
    command = [sys.executable, "-m", "cudaship", "audit", "--no-progress", "--load", "--offline"]
    command += ["--find-links", str(wheelhouse), "-f", "json", *options, str(wheel)]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=timeout, check=False)
    try:
        data = json.loads(done.stdout)
    except ValueError:
        data = {}
    return done, data


def probes(data: dict) -> list[dict]:
    return [p for w in data.get("wheels", ()) for p in ((w.get("load") or {}).get("probes") or ())]
