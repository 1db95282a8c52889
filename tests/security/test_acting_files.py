"""Issue 30, classes 1-3: what ``toolkit install`` and ``repair`` write and remove, with the attack planted.

- class 1: a symbolic link planted at a name cudaship writes (the lock file beside ``--dest``, the repaired
  wheel's temporary and final names in ``-w``) never makes it write anywhere else;
- class 2: cleaning up after an interrupted install never removes a user's directory whose name merely begins
  like a staging name;
- class 3: two inputs with one output name are refused before anything is written.

A victim file outside the destination is checked byte for byte after each run.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from cudaship.toolkit.lock import lock_path
from tests.toolkit.builders import build_redist

VICTIM = b"the user's precious file, outside every destination\n"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    victim.write_bytes(VICTIM)
    return victim


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _install(mirror: Path, dest: Path, tmp_path: Path) -> int:
    return main(
        [
            "toolkit",
            "install",
            "cu130",
            "--platform",
            "linux-x86_64",
            "--components",
            "cudart",
            "--dest",
            str(dest),
            "--mirror",
            str(mirror),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--retries",
            "0",
            "-q",
        ]
    )


# --- class 1: links planted at the names cudaship writes ----------------------------------------------------


def test_a_link_at_the_lock_file_name_is_refused_and_the_victim_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = _victim(tmp_path)
    mirror = build_redist(tmp_path / "redist").root
    dest = tmp_path / "cuda"
    lock_path(dest).symlink_to(victim)
    code = _install(mirror, dest, tmp_path)
    assert victim.read_bytes() == VICTIM
    assert code == ExitCode.BAD_INPUT
    line = _one_line(capsys.readouterr().err)
    assert "symbolic link" in line and "cudaship-lock" in line, line
    assert not dest.exists()
    assert os.readlink(lock_path(dest)) == str(victim)  # not ours: left as it is


def test_a_link_at_the_cache_lock_name_never_truncates_the_victim(tmp_path: Path) -> None:
    """The download cache takes a lock per blob beside it: the same rule there."""
    victim = _victim(tmp_path)
    tree = build_redist(tmp_path / "redist")
    cache = tmp_path / "cache"
    assert _install(tree.root, tmp_path / "first", tmp_path) == ExitCode.OK
    blobs = sorted(p for p in (cache / "toolkit").rglob("*") if p.is_file() and len(p.name) == 64)
    assert blobs
    for blob in blobs:  # a fresh fetch for each blob, its lock name planted
        blob.unlink()
        lock_path(blob).unlink(missing_ok=True)
        lock_path(blob).symlink_to(victim)
    code = _install(tree.root, tmp_path / "second", tmp_path)
    assert victim.read_bytes() == VICTIM
    assert code == ExitCode.BAD_INPUT


def _pid_temp_name(target: Path) -> Path:
    """The temporary name repair used to write through: predictable, it carried the pid."""
    return target.with_name(f".{target.name}.cudaship-{os.getpid()}.tmp")


def test_a_link_at_the_repair_temporary_name_is_not_written_through(
    auditwheel_vendored: Path, tmp_path: Path
) -> None:
    victim = _victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    target = out / auditwheel_vendored.name
    planted = _pid_temp_name(target)
    planted.symlink_to(victim)
    assert main(["repair", str(auditwheel_vendored), "-w", str(out), "-o", str(tmp_path / "r.txt")]) == 0
    assert victim.read_bytes() == VICTIM
    assert not target.is_symlink() and target.is_file()
    with zipfile.ZipFile(target) as zf:
        assert zf.testzip() is None
    assert planted.is_symlink() and os.readlink(planted) == str(victim)  # not ours: left as it is
    assert sorted(p.name for p in out.iterdir()) == sorted([target.name, planted.name])


def test_a_link_at_the_repaired_wheel_name_is_replaced_not_followed(
    auditwheel_vendored: Path, tmp_path: Path
) -> None:
    """Decision (docs/reliability.md): the output name in -w is replaced by rename, whatever is there; a link
    there is replaced as a link and what it pointed to stays as it was."""
    victim = _victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    target = out / auditwheel_vendored.name
    target.symlink_to(victim)
    assert main(["repair", str(auditwheel_vendored), "-w", str(out), "-o", str(tmp_path / "r.txt")]) == 0
    assert victim.read_bytes() == VICTIM
    assert not target.is_symlink()
    with zipfile.ZipFile(target) as zf:
        assert zf.testzip() is None
    assert [p.name for p in out.iterdir()] == [target.name]


# --- class 2: cleanup removes only what cudaship made -----------------------------------------------------


def test_cleanup_never_removes_user_directories_named_like_staging(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mirror = build_redist(tmp_path / "redist").root
    dest = tmp_path / "cuda"
    assert _install(mirror, dest, tmp_path) == ExitCode.OK
    user_dirs = [tmp_path / ".cuda.old-backup-2025", tmp_path / ".cuda.staging-notes"]
    for d in user_dirs:
        (d / "sub").mkdir(parents=True)
        (d / "notes.txt").write_bytes(VICTIM)
        (d / "sub" / "more.txt").write_bytes(VICTIM)
    # a staging directory the way the old code named it, but with no proof: also not removed
    (tmp_path / ".cuda.staging-abc123").mkdir()
    assert _install(mirror, dest, tmp_path) == ExitCode.OK  # reinstall: cleans up leftovers first
    assert main(["toolkit", "remove", str(dest)]) == ExitCode.OK
    for d in user_dirs:
        assert (d / "notes.txt").read_bytes() == VICTIM
        assert (d / "sub" / "more.txt").read_bytes() == VICTIM
    assert (tmp_path / ".cuda.staging-abc123").is_dir()
    assert not dest.exists()
    capsys.readouterr()


# --- class 3: one output name, two inputs ------------------------------------------------------------------


def test_two_inputs_with_one_output_name_are_refused_before_writing(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = tmp_path / "a" / auditwheel_vendored.name
    b = tmp_path / "b" / auditwheel_vendored.name
    for copy in (a, b):
        copy.parent.mkdir()
        copy.write_bytes(auditwheel_vendored.read_bytes())
    out = tmp_path / "out"
    assert main(["repair", str(a), str(b), "-w", str(out)]) == ExitCode.BAD_INPUT
    line = _one_line(capsys.readouterr().err)
    assert str(a) in line and str(b) in line and "same output name" in line, line
    assert not out.exists()
    assert a.read_bytes() == b.read_bytes() == auditwheel_vendored.read_bytes()
