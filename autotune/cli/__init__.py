"""The command line: `main`, the parser of every command, and how a run ends.

A run ends with one `autotune: error:` line for bad input or a standard output that cannot be
written. Each group of commands keeps its options and handlers in its own module: search.py with
search_parser.py, stored.py (export, check, report, list), fuzz.py; options.py holds the argument
types they share.
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import sys
from collections.abc import Sequence

from ..core import redact
from ..core.types import UserError, error_line
from ..core.version import __version__
from .fuzz import add_parser as add_fuzz_parser
from .fuzz import cmd_fuzz
from .options import Parser
from .search import cmd_search
from .search_parser import add_parser as add_search_parser
from .stored import add_parsers as add_stored_parsers
from .stored import cmd_check, cmd_export, cmd_list, cmd_report


def build_parser() -> argparse.ArgumentParser:
    """Return the parser of `autotune` and every command."""
    parser = Parser(prog="autotune", description="Write, check and tune strict-FP32 CUDA SGEMM kernels.")
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    add_search_parser(sub)
    add_stored_parsers(sub)
    add_fuzz_parser(sub)
    return parser


def _check_results_arg(args) -> None:
    results = getattr(args, "results", None)
    if results is None:
        return
    if results.is_symlink() and not results.exists():
        raise UserError(f"--results {results}: a symbolic link to nothing ({os.readlink(results)})")
    if results.exists() and not results.is_dir():
        raise UserError(f"--results {results}: is a file, not a folder")


COMMANDS = {
    "search": cmd_search,
    "export": cmd_export,
    "check": cmd_check,
    "report": cmd_report,
    "list": cmd_list,
    "fuzz": cmd_fuzz,
}


class OutputLost(BaseException):
    """Standard output cannot be written (a full disk, a reader gone, a closed descriptor).

    A BaseException, as KeyboardInterrupt is: no handler meant for the command's own errors may
    swallow it and carry on writing.
    """

    def __init__(self, exc: OSError):
        super().__init__(exc)
        self.reason = exc.strerror or str(exc) or type(exc).__name__


class _Stdout:
    """sys.stdout while a command runs: a write or flush failing with an OSError raises OutputLost.

    So main can tell an output error from any other; a character the stream cannot encode (a file
    name's undecodable bytes) is written escaped instead of failing.
    """

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except UnicodeEncodeError:
            enc = getattr(self._stream, "encoding", None) or "utf-8"
            return self.write(text.encode(enc, "backslashreplace").decode(enc))
        except OSError as exc:
            raise OutputLost(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise OutputLost(exc) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class _Closed:
    """Stand in for a standard output that was closed before autotune started."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


# The next file opened would otherwise take the closed descriptor's number, and a print or a child
# process's output would land in it (a results file, the study database).
def _hold_std_fds() -> None:
    """Point a standard descriptor closed at start (`autotune list >&-`) at devnull."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_RDWR)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)


def _say(text: str, secrets: tuple[str, ...] = ()) -> None:
    if sys.stderr is None:
        return  # closed before autotune started: the exit code is all that is left
    try:
        print(f"autotune: error: {error_line(redact.text(text, secrets))}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # no stderr to say it on: the same


def _secrets(args) -> tuple[str, ...]:
    # Whatever a message quotes (a storage URL, a driver's text), no password reaches the terminal.
    return tuple(redact.secrets(getattr(args, "storage", None) or ""))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status.

    Returns:
        0 or 1 as each command says; 2 with one `autotune: error:` line for bad input or when
        standard output cannot be written; 130 when interrupted.
    """
    closed = sys.stdout is None
    _hold_std_fds()
    real = sys.stdout
    sys.stdout = _Stdout(_Closed() if closed else real)
    try:
        code = _main(argv)
        sys.stdout.flush()
    except OutputLost as exc:
        _say(f"cannot write to standard output ({exc.reason})")
        # What is still buffered would fail again at exit: point the descriptor at devnull
        # (Python's advice for EPIPE, signal module, "Note on SIGPIPE").
        if not closed:
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, real.fileno())
                os.close(devnull)
            except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
                pass  # not a descriptor (a test's captured stream): nothing flushes it at exit
        return 2
    finally:
        sys.stdout = real
    return code


def _main(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()  # lists the families for --help, which reads AUTOTUNE_TEMPLATES
    except UserError as exc:
        _say(str(exc))
        return 2
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    if args.command is None:
        parser.print_help()
        return 2
    try:
        _check_results_arg(args)
        return COMMANDS[args.command](args)
    except UserError as exc:
        _say(str(exc), _secrets(args))
        return 2
    except OSError as exc:
        # What the system refuses about a path the command line or a results folder names and no
        # check before the work foresaw (a name too long, a folder gone meanwhile): bad input
        # too, said in one line naming the path.
        name = exc.filename
        where = "" if name is None else f"{os.fsdecode(name) if isinstance(name, (str, bytes)) else name}: "
        _say(f"{where}{exc.strerror or exc}", _secrets(args))
        return 2
    except KeyboardInterrupt:
        print("autotune: interrupted (a search resumes with the same command)", file=sys.stderr)
        return 130
