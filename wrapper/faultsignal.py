"""The signal on which a job's Python dumps its stacks, armed by `import fray` inside a fray job.

The wrapper's stack capture (fray.wrapper.stacks) uses py-spy when the node has
it; otherwise it sends STACK_SIGNAL to the workload's Python processes, whose
faulthandler then writes every thread's stack into the attempt's folder.
faulthandler's handler is C code: it runs even while the interpreter is stuck
in a lock or in a system call, where a Python-level handler would never run.

Each dump is appended to one file per attempt on the node's disk (`dump_path`).
The signal is SIGRTMIN+7 (41 with glibc): SIGUSR1 and SIGUSR2 are taken (fray's
"checkpoint now" and planned stop, Slurm's `--signal`, many training scripts'
own handlers), and the real-time signals below SIGRTMIN+7 are those libraries
reach for first. A real-time signal kills a process that does not catch it, so
the wrapper sends it only to a process whose SigCgt mask shows the handler.
"""

from __future__ import annotations

import hashlib
import os
import signal

from . import contract

STACK_SIGNAL_OFFSET = 7


def stack_signal() -> int | None:
    """The signal number (None where the platform has no real-time signals)."""
    base = getattr(signal, "SIGRTMIN", None)
    return None if base is None else int(base) + STACK_SIGNAL_OFFSET


def dump_path(attempt_dir: str) -> str:
    """Where the processes of the attempt in `attempt_dir` append their dumps: this user's private folder on the
    node's disk (fray.wrapper.jobside.private_tmp), not the attempt folder, which only the wrapper's records fill;
    the wrapper reads it into stacks.txt and removes it when the attempt ends."""
    from .jobside import private_tmp

    digest = hashlib.sha256(os.path.abspath(attempt_dir).encode()).hexdigest()[:16]
    return os.path.join(private_tmp(), f"stacks-{digest}.faulthandler")


def arm() -> bool:
    """In a fray job, have faulthandler dump every thread's stack on STACK_SIGNAL; False outside one.

    Called on `import fray`: it must cost next to nothing and never fail the import.
    """
    folder = os.environ.get(contract.ENV_ATTEMPT_DIR)
    signum = stack_signal()
    if _kept:
        return True  # armed by an earlier import (the tiny package, then the real one)
    if not folder or signum is None:
        return False
    try:
        import faulthandler

        from .procs import catches

        if signal.getsignal(signum) not in (signal.SIG_DFL, None) or catches(os.getpid(), signum):
            return False  # the workload (or a library in it) uses this signal itself: leave it alone
        # Append: every process of the job shares the file; the wrapper reads what one dump adds.
        fd = os.open(dump_path(folder), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        handle = os.fdopen(fd, "a", encoding="utf-8")
        faulthandler.register(signum, file=handle, all_threads=True, chain=False)
        _kept.append(handle)  # faulthandler keeps only the descriptor: the file object must stay open
        return True
    except (OSError, ValueError, RuntimeError, AttributeError):
        return False


def disarm() -> None:
    """Undo `arm` (a function host, fray.warm.function_host, arms it for each attempt it runs)."""
    signum = stack_signal()
    if not _kept or signum is None:
        return
    import faulthandler

    faulthandler.unregister(signum)
    for handle in _kept:
        handle.close()  # type: ignore[attr-defined]
    _kept.clear()


_kept: list[object] = []
