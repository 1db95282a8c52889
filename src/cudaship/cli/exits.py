"""The exit codes of every command, as its ``--help`` ends (docs/cli.md, "Exit codes", says the same).

One table, so no command's help lacks them (issue 35: five commands of eighteen listed theirs); a test walks
every command and checks that its help ends with its codes, that each is an :class:`ExitCode` (or 130), and
that no help text holds reStructuredText markup.
"""

from __future__ import annotations

import click

from cudaship.exitcodes import ExitCode

_E = ExitCode
_BAD = (_E.BAD_INPUT, "bad usage or input (one line naming it)")
_TRAIN = (_E.UNKNOWN_TRAIN, "a train it cannot serve: no CUDA train, never published, or not in its data")
#: every command: a bug, Ctrl-C
_ALWAYS = ((_E.INTERNAL, "a bug in cudaship (rerun with --debug)"), (130, "interrupted (Ctrl-C)"))

#: command path (``program check``) -> (code, meaning), the codes it may return besides those of _ALWAYS
EXITS: dict[str, tuple[tuple[int, str], ...]] = {
    "cudaship": ((_E.OK, "help or version printed"), _BAD),
    "inspect": (
        (_E.OK, "every input read"),
        (_E.BAD_INPUT, "an input could not be read (the others are still reported) or bad usage"),
    ),
    "audit": (
        (_E.OK, "every check of severity error passed"),
        (_E.FINDINGS, "a check of severity error failed (warnings and notes do not)"),
        (_E.BAD_INPUT, "a wheel or the policy could not be read, or bad usage"),
        _TRAIN,
    ),
    "gpus": (
        (_E.OK, "every input read"),
        (_E.FINDINGS, "with --require: a GPU asked cannot run the input (under the driver given)"),
        (_E.BAD_INPUT, "an input could not be read (the others are still reported) or bad usage"),
    ),
    "matrix": (
        (_E.OK, "printed, and the release gate holds"),
        (_E.FINDINGS, "the release gate fails (a train the policy asks for is missing, ...)"),
        (_E.BAD_INPUT, "a bad configuration or bad usage"),
    ),
    "env": (
        (_E.OK, "printed (--check: the arch lists are the train's)"),
        (_E.FINDINGS, "--check: an arch list variable differs from the train's"),
        _BAD,
        _TRAIN,
        (_E.NO_TRAIN, "no train given (--train or $CUDASHIP_TRAIN)"),
    ),
    "arch-list": (
        (_E.OK, "printed"),
        (_E.BAD_INPUT, "bad usage or a bad arch table"),
        _TRAIN,
        (_E.NO_TRAIN, "no train given (--train or $CUDASHIP_TRAIN)"),
    ),
    "cmake": (
        (_E.OK, "printed or written"),
        (_E.BAD_INPUT, "bad usage, a bad table, or a toolkit that cannot build the train"),
        _TRAIN,
        (_E.NO_TRAIN, "no train given (--train or $CUDASHIP_TRAIN)"),
    ),
    "doctor": (
        (_E.OK, "everything runs here (--env: loads)"),
        (_E.FINDINGS, "something will not run on a GPU here (--env: will not load)"),
        (_E.BAD_INPUT, "a PATH (a library of the environment) could not be read, or bad usage"),
        (_E.NO_GPU, "no NVIDIA driver or no GPU here (--env: only with --require-gpu)"),
    ),
    "repair": (
        (_E.OK, "repaired (or nothing to repair)"),
        (_E.BAD_INPUT, "a wheel could not be read, repaired or written, or bad usage"),
    ),
    "program": ((_E.OK, "help printed"), _BAD),
    "program inspect": (
        (_E.OK, "every input read"),
        (_E.BAD_INPUT, "an input could not be read, or bad usage"),
    ),
    "program export": (
        (_E.OK, "exported, and the package passes its own check"),
        (_E.FINDINGS, "the exported package fails its check"),
        (_E.BAD_INPUT, "the model could not be exported, or bad usage"),
    ),
    "program check": (
        (_E.OK, "every check passed (skipped ones are named)"),
        (_E.FINDINGS, "a check failed"),
        (_E.BAD_INPUT, "the directory could not be read, or bad usage"),
        _TRAIN,
    ),
    "program run": (
        (_E.OK, "the program ran and matched its reference"),
        (_E.FINDINGS, "the run failed or did not match"),
        (_E.BAD_INPUT, "the directory could not be read, or bad usage"),
        (_E.NO_GPU, "no NVIDIA driver or no GPU here"),
    ),
    "toolkit": ((_E.OK, "help printed"), _BAD),
    "toolkit install": (
        (_E.OK, "installed"),
        (_E.BAD_INPUT, "a download or archive failed, or bad usage"),
        (_E.UNKNOWN_TRAIN, "a train it cannot install (with the reason)"),
    ),
    "toolkit list": ((_E.OK, "printed"), _BAD),
    "toolkit verify": (
        (_E.OK, "every file matches the manifest"),
        (_E.FINDINGS, "a file is missing or changed"),
        _BAD,
    ),
    "toolkit remove": ((_E.OK, "removed"), (_E.BAD_INPUT, "not a toolkit cudaship installed, or bad usage")),
    "toolkit env": ((_E.OK, "printed"), (_E.BAD_INPUT, "not a toolkit cudaship installed, or bad usage")),
    "survey": (
        (
            _E.OK,
            "surveyed (a wheel that could not be read is an error row, counted; 1 is never used)",
        ),
        (_E.BAD_INPUT, "a source, the survey directory or an option could not be used, or bad usage"),
    ),
    "variant": ((_E.OK, "help printed"), _BAD),
    "variant properties": (
        (_E.OK, "printed"),
        (_E.BAD_INPUT, "the wheel (or its variant.json) could not be read, or bad usage"),
    ),
    "variant make": (
        (_E.OK, "written"),
        (_E.BAD_INPUT, "the wheel could not be read or written, is a variant already, or carries no CUDA"),
    ),
    "variant release": (
        (_E.OK, "every check of severity error passed"),
        (
            _E.FINDINGS,
            "a machine gets a variant it cannot run, a gap in the coverage, or metadata that disagree",
        ),
        (_E.BAD_INPUT, "a wheel or the index's variants.json could not be read, or bad usage"),
        (_E.NO_GPU, "--here: no NVIDIA driver or no GPU here (and no NV_VARIANT_PROVIDER_FORCE_* override)"),
    ),
}


def codes(path: str) -> tuple[tuple[int, str], ...]:
    """The exit codes of the command at ``path`` (``program check``; ``cudaship`` for the top level)."""
    return (*EXITS[path], *_ALWAYS)


def epilog(path: str) -> str:
    """``Exit status: 0 printed; 2 bad usage ...; 130 interrupted (Ctrl-C).`` for the end of ``--help``."""
    return "Exit status: " + "; ".join(f"{int(code)} {meaning}" for code, meaning in codes(path)) + "."


def attach(command: click.Command, path: str) -> click.Command:
    """``command`` with its exit codes as the epilog of its help (and its subcommands', for a group)."""
    if path in EXITS and not command.epilog:
        command.epilog = epilog(path)
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            attach(sub, f"{path} {name}" if path != "cudaship" else name)
    return command
