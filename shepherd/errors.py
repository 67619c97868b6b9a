"""Every error fray raises on purpose, rooted in one exception: catch `FrayError` (`fray.FrayError`) to catch them all.

    FrayError                     anything fray reports to a person (exit_code 2 unless said)
    ├── UsageError                bad input on the command line, in a directive or an API call
    │   ├── DirectiveError        a bad `#FRAY` line: file, line number, text, what is valid
    │   ├── RunLookupError        a RUN argument that names no run, or more than one
    │   │   └── AmbiguousRun      more than one: it lists the candidates
    │   ├── SubmissionRefused     a run that can never start as asked, refused before anything is written
    │   ├── ConstraintSyntaxError a `--constraint` that does not parse (fray.core.placement.constraints)
    │   └── ConstraintTypeError   a constraint compared with an attribute of another type (same module)
    ├── StateError                FRAY_HOME missing, unwritable, or a state file unusable
    │   ├── CorruptFileError      a state file that failed validation (it was moved aside)
    │   ├── LeaseLost             the daemon's lease passed to another (fray.daemon.lease_keeper): it
    │   │                         stops before it writes
    │   └── LockTimeout           a lock on a shared file stayed held for the whole wait
    │                             (fray.state.shared_lock)
    ├── BackendError              an external command failed; `temporary` says whether the
    │   │                         daemon should simply retry on its next cycle
    │   └── AmbiguousSubmission   the backend may or may not have the attempt (e.g. sbatch
    │                             timed out): look it up before ever submitting again
    ├── RemoteError               `--remote`: the SSH link kept the command from running (exit_code 255,
    │   │                         as ssh; fray.remote.errors)
    │   ├── UnreachableHost       the host does not answer, or its name does not resolve
    │   ├── AuthenticationFailed  the login or the key was refused
    │   ├── UnknownHostKey        the host is not in known_hosts (`fray remote trust HOST`)
    │   ├── ChangedHostKey        the host's key changed (`fray remote trust HOST --replace`)
    │   ├── RemoteCommandFailed   a command fray needs on the host failed
    │   └── ConnectionDropped     the connection dropped midway
    ├── ClusterError              a cluster API call could not be carried out (fray.cluster.api;
    │   │                         `fray.ClusterError`)
    │   └── JobFailed             a job waited for with raise_on_failure did not succeed (`fray.JobFailed`)
    ├── ActorConnectionError      an actor could not be reached, or the connection broke before it
    │                             answered; also a ConnectionError (fray.actors.client;
    │                             `fray.ActorConnectionError`)
    ├── ActorNotFound             the server no longer serves that actor; also a LookupError (same module)
    ├── RemoteActorError          an actor raised an exception that could not be sent back as itself
    │                             (same module; `fray.RemoteActorError`)
    └── AuthError                 an actor peer could not prove it shares FRAY_HOME's secret; also a
                                  ConnectionError (fray.actors.auth)

Two errors users meet are not in the tree, on purpose:

- `RemoteTraceback` carries the traceback text of an exception raised elsewhere
  (a job, an actor) as the `__cause__` of the one re-raised here; the error is
  the job's own exception, not fray's.
- `fray.report.Superseded` (fray.wrapper.fence) is raised inside a job whose
  attempt was replaced; the wrapper is standard-library only and imports
  nothing of fray, so it cannot derive from FrayError.

Each error renders itself with `str()`; the CLI prints that and exits with
`exit_code`. Messages say what went wrong, where, and what to do next.
tests/package/test_error_tree.py checks that every FrayError is listed here.
"""

from __future__ import annotations

import errno
from pathlib import Path


class FrayError(Exception):
    """Anything fray reports to a person (`fray.FrayError`): `str()` says what went wrong and what to do next;
    `exit_code` is what the CLI exits with."""

    exit_code = 2


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a job or an actor, as text: the `__cause__` of that exception here."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


class UsageError(FrayError):
    pass


class DirectiveError(UsageError):
    def __init__(self, path: str | Path, line_no: int, text: str, problem: str) -> None:
        self.path = str(path)
        self.line_no = line_no
        self.text = text
        self.problem = problem
        super().__init__(f"{self.path}:{line_no}: {problem}\n    {text.rstrip()}")


class RunLookupError(UsageError):
    pass


class AmbiguousRun(RunLookupError):
    """A RUN argument that names several runs (a name or an id prefix shared): `candidates` lists them."""

    def __init__(self, message: str, candidates: list[str]) -> None:
        self.candidates = candidates
        super().__init__(message)


class SubmissionRefused(UsageError):
    """A run that can never start as it asks (the backend could never offer it, or sbatch --test-only refused
    it): nothing was written."""


class StateError(FrayError):
    pass


class CorruptFileError(StateError):
    def __init__(self, path: Path, problem: str, moved_to: Path | None) -> None:
        self.path = path
        self.problem = problem
        self.moved_to = moved_to
        where = f"; moved aside to {moved_to}" if moved_to else ""
        super().__init__(f"corrupt state file {path}: {problem}{where}")


class LeaseLost(StateError):
    """This daemon no longer holds the lease of its FRAY_HOME: another host's daemon took a newer generation, or this
    one was paused past its lease. It must not write (fray.daemon.lease_keeper)."""


class LockTimeout(StateError):
    """A lock on a shared file (fray.state.shared_lock) stayed held by another process for the whole wait."""


class BackendError(FrayError):
    def __init__(self, message: str, *, temporary: bool = True) -> None:
        self.temporary = temporary
        super().__init__(message)


class AmbiguousSubmission(BackendError):
    pass


def failure_message(exc: BaseException) -> tuple[str, int] | None:
    """What the CLI prints for `exc` and the exit code, or None when it is not fray's to report.

    A closed pipe (`fray list | head`) is not reported: the reader left on purpose.
    """
    if isinstance(exc, FrayError):
        return f"fray: error: {exc}", exc.exit_code
    if isinstance(exc, OSError) and exc.errno != errno.EPIPE:
        where = f": {exc.filename}" if exc.filename else ""
        return f"fray: error: {exc.strerror or exc}{where}", 2
    return None
