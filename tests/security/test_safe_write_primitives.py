"""The primitives of :mod:`cudaship.safe_write` that everything cudaship creates goes through (wheels,
toolkits, caches, lock files): exclusive creation under unpredictable names, rename into place, reusable own
files, and work directories proven cudaship's by a marker. Each attack is planted for real (links, hard
links, FIFOs, look-alike directories) and a victim outside is checked byte for byte."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from cudaship import safe_write
from cudaship.errors import ToolkitError, UsageError

VICTIM = b"not cudaship's\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "victim"
    path.parent.mkdir()
    path.write_bytes(VICTIM)
    return path


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    path = tmp_path / "dest"
    path.mkdir()
    return path


def _names(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def test_create_exclusive_makes_a_private_file_under_a_random_name(dest: Path) -> None:
    names = set()
    for _ in range(3):
        fd, path = safe_write.create_exclusive(dest, ".x.", suffix=".tmp")
        os.close(fd)
        assert path.parent == dest and path.name.startswith(".x.") and path.name.endswith(".tmp")
        assert len(path.name) == len(".x.") + 16 + len(".tmp")
        info = os.lstat(path)
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600 and info.st_size == 0
        names.add(path.name)
    assert len(names) == 3


def test_create_exclusive_skips_a_planted_name(
    dest: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link already at the name it draws is never opened: another name is drawn."""
    draws = iter(["0" * 16, "1" * 16])
    monkeypatch.setattr(safe_write.secrets, "token_hex", lambda n: next(draws))
    (dest / f".x.{'0' * 16}.tmp").symlink_to(victim)
    fd, path = safe_write.create_exclusive(dest, ".x.")
    with os.fdopen(fd, "wb") as f:
        f.write(b"mine")
    assert path.name == f".x.{'1' * 16}.tmp"
    assert victim.read_bytes() == VICTIM


def test_new_file_places_only_when_complete(dest: Path) -> None:
    target = dest / "out.whl"
    with safe_write.new_file(target) as out:
        out.file.write(b"first part ")
        assert not target.exists()
        assert [n for n in _names(dest) if n.startswith(".out.whl.")]
        out.file.write(b"and the rest")
        out.place()
    assert target.read_bytes() == b"first part and the rest"
    assert _names(dest) == ["out.whl"]


def test_new_file_failure_removes_only_its_temporary_file(dest: Path) -> None:
    target = dest / "out.whl"
    target.write_bytes(b"previous")
    (dest / "unrelated").write_bytes(b"keep")
    with pytest.raises(RuntimeError), safe_write.new_file(target) as out:
        out.file.write(b"half")
        raise RuntimeError("interrupted")
    assert target.read_bytes() == b"previous"
    assert _names(dest) == ["out.whl", "unrelated"]


def test_new_file_replaces_a_link_at_the_target_never_follows_it(dest: Path, victim: Path) -> None:
    target = dest / "out.whl"
    target.symlink_to(victim)
    safe_write.replace_bytes(target, b"wheel")
    assert not target.is_symlink() and target.read_bytes() == b"wheel"
    assert victim.read_bytes() == VICTIM


def test_new_file_refuses_a_directory_at_the_target(dest: Path) -> None:
    target = dest / "out.whl"
    (target / "inside").mkdir(parents=True)
    with pytest.raises(ToolkitError) as caught:
        safe_write.replace_bytes(target, b"wheel", error=ToolkitError)
    assert "a directory is there" in str(caught.value) and "\n" not in str(caught.value)
    assert _names(dest) == ["out.whl"] and _names(target) == ["inside"]


def test_open_reusable_creates_then_reuses_its_own_file(dest: Path) -> None:
    path = dest / ".x.cudaship-lock"
    fd = safe_write.open_reusable(path)
    os.write(fd, b"123")
    os.close(fd)
    fd = safe_write.open_reusable(path)
    try:
        assert os.read(fd, 10) == b"123"
    finally:
        os.close(fd)


def test_open_reusable_refuses_a_link(dest: Path, victim: Path) -> None:
    path = dest / ".x.cudaship-lock"
    path.symlink_to(victim)
    with pytest.raises(UsageError, match="symbolic link"):
        safe_write.open_reusable(path, what="lock file")
    dangling = dest / ".y.part"
    dangling.symlink_to(dest / "nowhere")
    with pytest.raises(UsageError, match="symbolic link"):
        safe_write.open_reusable(dangling)
    assert not (dest / "nowhere").exists()
    assert victim.read_bytes() == VICTIM


def test_open_reusable_refuses_a_hard_link(dest: Path, victim: Path) -> None:
    path = dest / ".x.part"
    os.link(victim, path)
    with pytest.raises(UsageError, match="2 hard links"):
        safe_write.open_reusable(path)
    assert victim.read_bytes() == VICTIM


def test_open_reusable_refuses_a_fifo_without_blocking(dest: Path) -> None:
    path = dest / ".x.part"
    os.mkfifo(path)
    with pytest.raises(UsageError, match="not a file"):
        safe_write.open_reusable(path)


def test_owned_dir_is_proven_by_its_marker(dest: Path) -> None:
    made = safe_write.make_owned_dir(dest, ".cuda.staging-")
    assert made.path.parent == dest and made.path.name.startswith(".cuda.staging-")
    assert stat.S_IMODE(os.lstat(made.path).st_mode) == 0o700
    assert _names(made.path) == [safe_write.OWNER_MARKER]
    assert safe_write.owns(made.path)
    (made.path / "toolkit" / "bin").mkdir(parents=True)
    (made.path / "toolkit" / "bin" / "nvcc").write_bytes(b"x")
    made.remove()
    assert _names(dest) == []


def test_look_alikes_are_not_owned_and_not_removed(dest: Path, victim: Path) -> None:
    made = safe_write.make_owned_dir(dest, ".cuda.staging-")
    plain = dest / ".cuda.staging-notes"  # a user's directory: no marker
    plain.mkdir()
    (plain / "notes.txt").write_bytes(VICTIM)
    copied = dest / ".cuda.old-backup-2025"  # a marker copied from another directory names that one
    copied.mkdir()
    shutil.copy(made.path / safe_write.OWNER_MARKER, copied / safe_write.OWNER_MARKER)
    (copied / "data").write_bytes(VICTIM)
    linked_marker = dest / ".cuda.staging-linked"  # a marker that is a link is no proof
    linked_marker.mkdir()
    (linked_marker / safe_write.OWNER_MARKER).symlink_to(made.path / safe_write.OWNER_MARKER)
    link_to_owned = dest / ".cuda.staging-link"  # a link to an owned directory is not a directory
    link_to_owned.symlink_to(made.path)
    for path in (plain, copied, linked_marker, link_to_owned):
        assert not safe_write.owns(path), path
        assert not safe_write.remove_owned(path), path
    assert (plain / "notes.txt").read_bytes() == VICTIM
    assert (copied / "data").read_bytes() == VICTIM
    assert safe_write.owns(made.path) and link_to_owned.is_symlink()
    assert safe_write.remove_owned(made.path)
    assert sorted(_names(dest)) == sorted(p.name for p in (plain, copied, linked_marker, link_to_owned))


def test_removing_an_owned_dir_never_follows_links_inside(dest: Path, victim: Path) -> None:
    made = safe_write.make_owned_dir(dest, ".cuda.old-")
    (made.path / "to-victim").symlink_to(victim)
    (made.path / "to-outside-dir").symlink_to(victim.parent, target_is_directory=True)
    made.remove()
    assert not made.path.exists()
    assert victim.read_bytes() == VICTIM and _names(victim.parent) == ["victim"]
