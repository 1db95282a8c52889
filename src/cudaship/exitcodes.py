"""Documented exit codes, shared by every subcommand (see docs/cli.md)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  #: everything read, every check passed
    FINDINGS = 1  #: a check failed (audit, program check, matrix release gate, ...)
    BAD_INPUT = 2  #: bad input, bad usage, an unreadable file or policy (even when the others were reported)
    NO_GPU = 3  #: doctor / program run: no NVIDIA driver or no GPU on this machine
    UNKNOWN_TRAIN = 4  #: a CUDA train the data does not know
    NO_TRAIN = 5  #: arch-list / env: CUDA requested but no train given
    INTERNAL = 70  #: a bug in cudaship (an unexpected exception); rerun with --debug
