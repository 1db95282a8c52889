"""Every row of data/repair_providers.toml against the real wheels: for each platform a row claims, the wheel
of the version it names (the one pip installs for the row's range there) is read by HTTP range request (its
central directory and .dist-info only, cached in the test cache's wheel-heads) and must hold the row's file
at the row's path. A row that claims a file NVIDIA's wheel does not ship (the Windows NVTX wheels: headers
only) fails here, not in a user's import."""

from __future__ import annotations

import os
import urllib.request
import zipfile

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from cudaship.knowledge.repair import ProviderRow, provider_rows
from tests.fixtures.wheels import INDEX_URL, RealWheel, _Links, fetch_head

pytestmark = [pytest.mark.network, pytest.mark.slow]

#: cudaship's platform spelling -> what picks that platform's file out of the index (a file name part)
TAGS = {"linux-x86_64": "x86_64", "linux-aarch64": "aarch64", "windows-x86_64": "win_amd64"}


def _claims() -> list[tuple[ProviderRow, str, str]]:
    return [(row, platform, version) for row in provider_rows() for platform, version in row.checked]


def _path(row: ProviderRow, platform: str) -> str:
    return row.path("windows" if platform.startswith("windows") else "linux") or ""


def test_every_row_claims_a_known_platform() -> None:
    claims = _claims()
    assert len(claims) >= 100
    assert {platform for _, platform, _ in claims} <= set(TAGS)
    for row, platform, _ in claims:
        assert row.path("windows" if platform.startswith("windows") else "linux") is not None, row


@pytest.mark.parametrize(
    ("row", "platform", "version"),
    _claims(),
    ids=[f"{r.project}-{v}-{p}-{_path(r, p).rsplit('/', 1)[-1]}" for r, p, v in _claims()],
)
def test_the_wheel_ships_the_file(row: ProviderRow, platform: str, version: str) -> None:
    head = fetch_head(RealWheel(row.project, version, TAGS[platform]))
    path = _path(row, platform)
    with zipfile.ZipFile(head) as zf:
        names = set(zf.namelist())
    assert path in names, f"{head.name} holds no {path}"


def _newest(project: str, spec: SpecifierSet, tag: str) -> str | None:
    """The version pip installs for ``project`` in ``spec`` on the platform whose files carry ``tag``: the
    newest final release with such a wheel (from the index's simple page)."""
    index = os.environ.get("PIP_INDEX_URL", INDEX_URL).rstrip("/")
    page_url = f"{index}/{project}/"
    with urllib.request.urlopen(page_url, timeout=60) as response:
        links = _Links()
        links.feed(response.read().decode("utf-8", "replace"))
    found: list[Version] = []
    for name, _ in links.links:
        parts = name[: -len(".whl")].split("-") if name.endswith(".whl") else []
        if len(parts) < 5 or tag not in parts[-1]:
            continue
        try:
            version = Version(parts[1])
        except InvalidVersion:
            continue
        if not version.is_prerelease and version in spec:
            found.append(version)
    return str(max(found)) if found else None


@pytest.mark.parametrize("project", sorted({r.project for r in provider_rows()}))
def test_each_row_names_the_version_pip_installs(project: str) -> None:
    """The version a row names is the newest in its range on each platform (pip's pick): a new release
    that drops the file (nvidia-nvtx-cu12 12.9 did) shows up here as a row to check again."""
    for row in provider_rows():
        if row.project != project:
            continue
        major = row.cuda
        spec = SpecifierSet(f">={major}.0,<{major + 1}" if row.range == "train" else row.range)
        for platform, version in row.checked:
            assert _newest(project, spec, TAGS[platform]) == version, (project, row.range, platform)
