"""How a failed command is reported: `fray: error: ...` on stderr, or under --json one JSON object on stdout.

Under `--json` a script reads one document whatever happens: the command's
result, or `{"error": {code, message, hint, exit_code}}` (schemas/cli-error.json)
with the same exit code the human form has. `json_errors` is set once per
invocation by `fray.cli.main.run_parsed`, before click parses anything.
"""

from __future__ import annotations

import sys
from contextvars import ContextVar
from typing import Any

from fray.cli import output
from fray.errors import (BackendError, CorruptFileError, DirectiveError, FrayError, RunLookupError, StateError,
                         UsageError, failure_message)

json_errors: ContextVar[bool] = ContextVar("json_errors", default=False)

PREFIX = "fray: error: "
_HINTS = {
    "usage": "`fray --help`, or `fray COMMAND --help`, says what each command takes",
    "run_not_found": "`fray list` shows the runs and their ids",
}


def report(exc: BaseException) -> int | None:
    """Report a fray error or an OS error; its exit code, or None when it is not fray's to report."""
    failure = failure_message(exc)
    if failure is None:
        return None
    text, exit_code = failure
    if json_errors.get():
        _emit_json(_code_of(exc), text.removeprefix(PREFIX), exit_code)
    else:
        print(text, file=sys.stderr)
    return exit_code


def report_usage(exc: Any) -> int:
    """A click usage error (unknown option, missing argument, no such command): exit 2, as click does."""
    exit_code = getattr(exc, "exit_code", 2)
    if json_errors.get():
        # A bare `fray --json` is "no command", not the help text as an error message.
        message = "no command given" if type(exc).__name__ == "NoArgsIsHelpError" else exc.format_message()
        _emit_json("usage", message, exit_code)
    else:
        exc.show()
    return exit_code


def _code_of(exc: BaseException) -> str:
    from fray.remote.errors import RemoteError  # reached only when a failure is reported

    for kind, code in ((DirectiveError, "bad_directive"), (RunLookupError, "run_not_found"), (UsageError, "usage"),
                       (CorruptFileError, "corrupt_state"), (StateError, "state"), (BackendError, "backend"),
                       (RemoteError, "remote"), (FrayError, "usage")):
        if isinstance(exc, kind):
            return code
    return "os_error"


def _emit_json(code: str, message: str, exit_code: int) -> None:
    output.json_line({"error": {"code": code, "message": message, "hint": _HINTS.get(code), "exit_code": exit_code}})
