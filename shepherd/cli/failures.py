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
from fray.errors import (AmbiguousRun, BackendError, CorruptFileError, DirectiveError, FrayError, RunLookupError,
                         StateError, SubmissionRefused, UsageError, failure_message)

json_errors: ContextVar[bool] = ContextVar("json_errors", default=False)

PREFIX = "fray: error: "
_HINTS = {
    "usage": "`fray --help`, or `fray COMMAND --help`, says what each command takes",
    "run_not_found": "`fray list` shows the runs and their ids",
    "run_ambiguous": "give one of the candidates' run ids (or enough of one to be unique); `fray list` shows them",
    "submission_refused": "nothing was written: change what the script's lines or the flags ask and submit again "
                          "(`fray partitions` and `fray nodes` show what the cluster has)",
}
# `--remote`: what to do about each way the link fails (fray.remote.errors), by the error's class name.
_REMOTE_HINTS = {
    "UnreachableHost": "check the host's name and that it answers SSH (`ssh HOST true`); --remote and FRAY_REMOTE "
                       "also take a Host of ~/.ssh/config",
    "AuthenticationFailed": "check that `ssh HOST true` logs in without a prompt (a key in ssh-agent, or an "
                            "IdentityFile in ~/.ssh/config)",
    "UnknownHostKey": "compare the fingerprint with the one the host's administrators publish, then "
                      "`fray remote trust HOST`",
    "ChangedHostKey": "do not connect until the new key is confirmed; then `fray remote trust HOST --replace`",
    "ConnectionDropped": "run the command again; `ssh HOST true` checks the link",
    "RemoteCommandFailed": "the message names the command that failed on the host; `ssh HOST` and run it there",
}


def report(exc: BaseException) -> int | None:
    """Report a fray error or an OS error; its exit code, or None when it is not fray's to report."""
    failure = failure_message(exc)
    if failure is None:
        return None
    text, exit_code = failure
    if json_errors.get():
        code = _code_of(exc)
        hint = _REMOTE_HINTS.get(type(exc).__name__, "") if code == "remote" else _HINTS.get(code)
        extra = {"candidates": list(exc.candidates)} if isinstance(exc, AmbiguousRun) else {}
        _emit_json(code, text.removeprefix(PREFIX), exit_code, hint or None, extra)
    else:
        print(text, file=sys.stderr)
    return exit_code


def report_usage(exc: Any) -> int:
    """A click usage error (unknown option, missing argument, no such command): exit 2, as click does."""
    exit_code = getattr(exc, "exit_code", 2)
    if json_errors.get():
        # A bare `fray --json` is "no command", not the help text as an error message.
        message = "no command given" if type(exc).__name__ == "NoArgsIsHelpError" else exc.format_message()
        _emit_json("usage", message, exit_code, _HINTS["usage"])
    else:
        exc.show()
    return exit_code


def _code_of(exc: BaseException) -> str:
    from fray.remote.errors import RemoteError  # reached only when a failure is reported

    for kind, code in ((DirectiveError, "bad_directive"), (AmbiguousRun, "run_ambiguous"),
                       (RunLookupError, "run_not_found"), (SubmissionRefused, "submission_refused"), (UsageError, "usage"),
                       (CorruptFileError, "corrupt_state"), (StateError, "state"), (BackendError, "backend"),
                       (RemoteError, "remote"), (FrayError, "usage")):
        if isinstance(exc, kind):
            return code
    return "os_error"


def _emit_json(code: str, message: str, exit_code: int, hint: str | None,
               extra: dict[str, Any] | None = None) -> None:
    output.json_line({"error": {"code": code, "message": message, "hint": hint, "exit_code": exit_code,
                                **(extra or {})}})
