"""``-o FILE`` is checked when the command line is read, before any work (issue 35: into a missing directory
it failed only after the whole read): a missing directory, a file where the directory should be, or a
directory that cannot be written is one line naming the file, exit 2, and nothing read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from tests.cli.test_common_options import _commands, _option

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "libvecadd.so")

#: every command taking -o (tests/cli/test_common_options.py checks they share the one option), each with
#: arguments it would run with: the -o given first is read first, so none of them gets to work
COMMANDS = [
    ["inspect", "--progress", EXAMPLE],
    ["audit", "--offline"],
    ["gpus", "--progress", EXAMPLE],
    ["arch-list", "--train", "cu130"],
    ["doctor"],
    ["matrix"],
    ["env", "--train", "cu130"],
    ["cmake", "--train", "cu130"],
    ["repair"],
    ["toolkit", "install", "cu130"],
    ["program", "check"],
]


def test_every_command_with_o_is_checked_first(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Every command and subcommand that takes -o, given nothing else: the output's error comes first."""
    target = tmp_path / "missing" / "r.json"
    labels = sorted(label for label, c in _commands().items() if _option(c, "--output") is not None)
    assert len(labels) >= 15, labels
    for label in labels:
        code, out, err = _run(capsys, [*label.split(), "-o", str(target)])
        assert (code, out) == (2, ""), (label, err)
        assert err.endswith(f"the directory {target.parent} does not exist\n"), (label, err)


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a[:2]) for a in COMMANDS])
def test_a_missing_directory_is_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    target = tmp_path / "missing" / "report.txt"
    at = 2 if argv[0] in ("toolkit", "program") else 1  # after the subcommand
    code, out, err = _run(capsys, [*argv[:at], "-o", str(target), *argv[at:]])
    assert code == ExitCode.BAD_INPUT, err
    assert out == ""
    assert err == f"cudaship: error: {target}: cannot write: the directory {target.parent} does not exist\n"
    assert not target.parent.exists()


def test_a_file_for_a_directory_and_a_read_only_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = _run(capsys, ["inspect", "--progress", EXAMPLE, "-o", str(blocker / "r.txt")])
    assert code == 2
    assert err == f"cudaship: error: {blocker / 'r.txt'}: cannot write: {blocker} is not a directory\n"
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        code, _, err = _run(capsys, ["inspect", EXAMPLE, "-o", str(locked / "r.txt")])
        assert code == 2 and err.endswith(f"the directory {locked} is not writable\n"), err
    # what can be written still is: a new file, an existing one, a device, standard output
    for target in (tmp_path / "new.txt", tmp_path / "new.txt", Path(os.devnull), Path("-")):
        code, _, err = _run(capsys, ["inspect", EXAMPLE, "-o", str(target)])
        assert code == 0, err
    assert "libvecadd.so" in (tmp_path / "new.txt").read_text()
