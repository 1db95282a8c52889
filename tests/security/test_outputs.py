"""Output targets (``-o``, ``--report``, GitHub and env files): the one writer, :mod:`cudaship.safe_write`.

Devices, FIFOs and links are made in a temporary directory (``mknod`` of /dev/null's numbers, ``mkfifo``, a
symlink to /dev/null): the machine's own /dev is never a target, and after each test /dev/null is checked to
still be the character device it was.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.errors import UsageError
from cudaship.safe_write import append_text, write_text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "libvecadd.so"


@pytest.fixture(autouse=True)
def dev_null_stays_a_device() -> Iterator[None]:
    before = os.stat("/dev/null")
    yield
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev, "/dev/null was replaced"


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp"))


def test_new_file_honours_the_umask(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "report.json"
    write_text(target, "{}\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    os.umask(0o077)
    other = tmp_path / "private.json"
    write_text(other, "{}\n")
    assert stat.S_IMODE(other.stat().st_mode) == 0o600
    assert _leftovers(tmp_path) == []


def test_existing_file_is_replaced_keeping_its_mode(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "report.txt"
    target.write_text("old\n")
    target.chmod(0o640)
    write_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_symlink_to_dev_null_is_written_through(tmp_path: Path) -> None:
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    write_text(link, "report\n")
    assert link.is_symlink() and os.readlink(link) == "/dev/null"
    assert _leftovers(tmp_path) == [] and not list(Path("/dev").glob(".null.*.tmp"))


def test_character_device_is_written_through_not_replaced(tmp_path: Path) -> None:
    device = tmp_path / "mynull"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.stat("/dev/null").st_rdev)  # a second /dev/null, in tmp
    write_text(device, "report\n")
    assert stat.S_ISCHR(device.stat().st_mode)  # still a device: written to, not replaced
    append_text(device, "more\n")
    assert stat.S_ISCHR(device.stat().st_mode)


def test_fifo_with_a_reader_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    ready = threading.Event()

    def reader() -> None:
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        ready.set()
        os.set_blocking(fd, True)
        chunks = []
        while True:
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:  # pragma: no cover - the writer has not opened yet
                continue
            if not chunk and chunks:
                break
            if chunk:
                chunks.append(chunk)
        os.close(fd)
        got.append(b"".join(chunks))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    ready.wait(10)
    write_text(fifo, "through the pipe\n")
    thread.join(10)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_fifo_without_a_reader_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="FIFO that no process is reading"):
        write_text(fifo, "x\n")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_symlink_to_a_file_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"


def test_dangling_symlink_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "elsewhere" / "x.txt")
    with pytest.raises(UsageError, match="symbolic link to nothing"):
        write_text(link, "x\n")
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("kind", ["directory", "socket"])
def test_other_kinds_are_refused_and_left_alone(tmp_path: Path, kind: str) -> None:
    import socket

    target = tmp_path / kind
    if kind == "directory":
        target.mkdir()
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(target))
        sock.close()
    mode = target.lstat().st_mode
    with pytest.raises(UsageError, match="not a file"):
        write_text(target, "x\n")
    with pytest.raises(UsageError, match="not a file"):
        append_text(target, "x\n")
    assert target.lstat().st_mode == mode


def test_append_creates_with_umask_and_appends(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "github_env"
    append_text(target, "A=1\n")
    append_text(target, "B=2\n")
    assert target.read_text() == "A=1\nB=2\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_cli_output_to_a_device_link_and_a_fifo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    link = tmp_path / "out"
    link.symlink_to("/dev/null")
    assert main(["inspect", str(EXAMPLE), "--format", "json", "-o", str(link)]) == 0
    assert link.is_symlink()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main(["inspect", str(EXAMPLE), "-o", str(fifo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "FIFO that no process is reading" in err[0]


def test_github_env_that_is_a_directory_is_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "env-dir"
    target.mkdir()
    monkeypatch.setenv("GITHUB_ENV", str(target))
    assert main(["env", "--train", "cu130", "--write", "github"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a file" in err[0]
    assert target.is_dir()
