"""Entry point: the ``cudaship`` command group, the one place errors become one line and an exit code."""

from __future__ import annotations

import atexit
import contextlib
import difflib
import gc
import importlib
import os
import sys
import threading
from typing import Any, NoReturn

import click

from cudaship import __version__, envvars
from cudaship.cli.exits import attach, epilog
from cudaship.errors import CudashipError
from cudaship.exitcodes import ExitCode

#: subcommand name -> module under cudaship.cli that defines ``command``. Imported only when used.
SUBCOMMANDS: dict[str, str] = {
    "inspect": "inspect_cmd",
    "audit": "audit_cmd",
    "gpus": "gpus_cmd",
    "arch-list": "arch_list_cmd",
    "doctor": "doctor_cmd",
    "toolkit": "toolkit_cmd",
    "matrix": "matrix_cmd",
    "env": "env_cmd",
    "cmake": "cmake_cmd",
    "program": "program_cmd",
    "repair": "repair_cmd",
    "variant": "variant_cmd",
    "survey": "survey_cmd",
}


class Interrupted(Exception):
    """Ctrl-C during a command, after the command unwound (its workers ended): :func:`main` prints one line
    and exits 130. Not a KeyboardInterrupt, which click answers with an empty line on stderr first."""


class LazyGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:
            raise Interrupted from e

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, and an unknown command gets the close names as suggestions (``inpsect``: did you mean
        'inspect'?), as an unknown option and a subcommand of ``toolkit`` do: click finds close names only
        among the commands it holds, and these are loaded when named."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            name = args[0] if args else ""
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            if not close or "did you mean" in e.format_message().lower():
                raise
            alternatives = repr(close[0]) if len(close) == 1 else "one of: " + ", ".join(map(repr, close))
            raise click.UsageError(f"No such command {name!r}. (Did you mean {alternatives}?)", ctx) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in SUBCOMMANDS if self.get_command(ctx, name) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = SUBCOMMANDS.get(cmd_name)
        if module_name is None:
            return None
        try:
            module = importlib.import_module(f"cudaship.cli.{module_name}")
        except ModuleNotFoundError as e:
            if e.name == f"cudaship.cli.{module_name}":
                return None  # not built in this version
            raise
        command: click.Command = module.command
        return attach(command, cmd_name)  # its exit codes end its --help


@click.group(
    cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=epilog("cudaship")
)
@click.version_option(__version__, prog_name="cudaship")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Make CUDA binaries ship right: inspect, audit and check wheels, libraries and programs."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    envvars.validate()  # a bad CUDASHIP_* value: one line naming it, exit 2, before any command runs


def usage_error_line(error: click.ClickException) -> str:
    """A usage error (bad option, missing argument, unknown command) as the one line every error is:
    ``cudaship: error: inspect: missing argument 'PATHS...' (see cudaship inspect --help)``."""
    message = " ".join(error.format_message().split())
    if message[:1].isupper() and not message[1:2].isupper():
        message = message[0].lower() + message[1:]
    for hint in (". (did you mean", ". (Did you mean"):
        message = message.replace(hint, " (did you mean")
    if message.endswith("."):
        message = message[:-1]
    ctx = getattr(error, "ctx", None)
    if ctx is None:
        return f"cudaship: error: {message}"
    path = ctx.command_path
    where = path.removeprefix("cudaship").strip()
    return f"cudaship: error: {where + ': ' if where else ''}{message} (see {path} --help)"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (tests call this directly)."""
    args = argv if argv is not None else sys.argv[1:]
    debug = "--debug" in args
    command = [a for a in args if a != "--debug"]
    if argv is None and command[:1] in (["inspect"], ["gpus"], ["audit"]):
        # the command itself, not a caller's test: its worker processes may start now
        # only the commands that may start worker processes import the pool: start-up time
        from cudaship.archive.pool import start_fork_server_early

        start_fork_server_early(command)
    try:
        result: Any = cli.main(args=argv, prog_name="cudaship", standalone_mode=False)
    except CudashipError as e:
        if debug:
            raise
        click.echo(f"cudaship: error: {e}", err=True)
        return int(e.exit_code)
    except (click.exceptions.Abort, Interrupted):  # Ctrl-C: one line, whatever was running
        click.echo("cudaship: aborted", err=True)
        return 130
    except click.exceptions.NoArgsIsHelpError as e:  # a bare ``cudaship`` or ``cudaship toolkit``: help
        if e.ctx is not None:
            click.echo(e.ctx.get_help())
        return ExitCode.OK
    except click.ClickException as e:
        click.echo(usage_error_line(e), err=True)
        return ExitCode.BAD_INPUT
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except KeyboardInterrupt:
        click.echo("cudaship: interrupted", err=True)
        return 130
    except Exception as e:  # a bug: one line, unless --debug
        if debug:
            raise
        from cudaship.render.escape import line  # only on a bug: start-up time of every command

        click.echo(line(f"cudaship: internal error: {type(e).__name__}: {e} (rerun with --debug)"), err=True)
        return ExitCode.INTERNAL
    return int(result) if isinstance(result, int) else ExitCode.OK


#: Allocations between two young-generation collections in the ``cudaship`` process (CPython's default:
#: 700). Reading a large library allocates a few hundred thousand small objects that all live to the end;
#: the default made 70 collections traverse them again and again (17 ms of a 0.3 s inspect). Collections
#: still run, so reference cycles are still freed on long runs. Set only by the console script, never by the
#: library API or :func:`main` (tests call it).
GC_THRESHOLD = 100_000


def entry() -> None:  # pragma: no cover - console script (tests/cli/test_exit.py runs it in a subprocess)
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    code = main()
    if code == 130:
        exit_aborted()
    exit_now(code)


def exit_aborted() -> NoReturn:
    """End an interrupted command (exit 130) at once: the command has unwound and its workers are gone, so
    the ``atexit`` functions run (temporary files) and the process ends without the interpreter's shutdown.
    That shutdown would run ``concurrent.futures``' own exit hook, which wakes an executor's manager thread
    through a pipe the interrupted pool may already have closed: ``OSError: [Errno 9] Bad file descriptor``
    and a traceback after ``cudaship: aborted`` (seen once under load on a clean machine, the fork-server
    case of tests/cli/test_interrupt.py)."""
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    _flushed()
    os._exit(130)


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` without tearing the interpreter down, when that changes nothing.

    The normal exit frees every object and module one by one (25 ms after inspecting a large library: its
    thousands of records, the modules). When only the main thread is left and stdout and stderr flush, the
    ``atexit`` functions are run, the streams flushed again and the process ends (``os._exit``; with status
    120 if that last flush fails, as Python's own exit does). Otherwise (other threads alive, or a flush
    failing, which the normal exit reports) the normal exit runs.
    """
    if threading.active_count() == 1 and _flushed():
        atexit._run_exitfuncs()
        os._exit(code if _flushed() else 120)
    sys.exit(code)


def _flushed() -> bool:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # a closed or broken stream, or none at all
        return False
    return True


if __name__ == "__main__":  # pragma: no cover
    entry()
