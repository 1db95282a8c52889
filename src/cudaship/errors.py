"""The project's error hierarchy.

Every error that cudaship raises on purpose derives from :class:`CudashipError`. The CLI catches it once,
prints ``str(error)`` as one line and exits with ``error.exit_code``. Anything else is a bug.
"""

from __future__ import annotations

from cudaship.exitcodes import ExitCode
from cudaship.render.escape import line


class CudashipError(Exception):
    """Root of all cudaship errors. ``path`` names the input the problem is about, when there is one."""

    exit_code: int = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def with_path(self, path: str) -> CudashipError:
        """Return this error naming ``path`` (readers raise without a path; callers that know it add it)."""
        if self.path is None:
            self.path = path
        return self

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        # one line even when a file name, a symbol or a TOML key from a hostile input holds a line break; no
        # terminal control character, no CI workflow command (cudaship.render.escape)
        return line(text)


class UsageError(CudashipError):
    """Bad command-line usage or option values."""


class BinaryFormatError(CudashipError):
    """A native binary, device-code file or import library is truncated, corrupt or not what it claims."""


class WheelError(CudashipError):
    """A wheel (zip, METADATA, WHEEL, RECORD) is unreadable or inconsistent."""


class ArchiveError(CudashipError):
    """A zip or tar archive (or one of its members) is unreadable, unsafe or over a limit. The layers that
    read archives (wheel, checks, program, toolkit) turn it into their own error."""


class PolicyError(CudashipError):
    """A policy or configuration file is invalid; the message names the key."""


class KnowledgeError(CudashipError):
    """A lookup in the CUDA knowledge base failed (unknown train, arch, GPU, ...)."""


class UnknownTrainError(KnowledgeError):
    """A CUDA train that the data does not know."""

    exit_code = ExitCode.UNKNOWN_TRAIN


class ToolkitError(CudashipError):
    """Assembling, verifying or removing a toolkit failed."""


class ProgramError(CudashipError):
    """An exported program package is unreadable or a program run failed."""


class NoGpuError(CudashipError):
    """No NVIDIA driver or GPU on this machine."""

    exit_code = ExitCode.NO_GPU


class OracleError(CudashipError):
    """The loader oracle could not run (no interpreter, no environment to load in); a load that fails is a
    result, never this."""
