"""What an `sbatch` that gave no job id means, and which line of the script its words point at (pure).

    judge(result)                      -> Answer: AMBIGUOUS, TRANSIENT or REFUSED
    words(result)                      -> what sbatch said, without its prefixes and its "Try --help" line
    pointed(said, script_text, spec)   -> the lines of the script (or fray's own flags) it is about
    estimate(stderr)                   -> Estimate of `sbatch --test-only`: when and where it would start

A refusal is judged by an allow-list of the answers that a later try can
change (the controller unreachable, a socket timeout, "temporarily unable",
a full queue, a per-user submit limit, a drained partition, the cluster's
authentication): those are retried with backoff, counted apart from the
node's faults. Anything else sbatch refuses is about the job's own request
(an option it does not know, a partition or GRES that does not exist, a
request no node can meet, a partition's limits), so the run ends
`failed_config` on the first try with sbatch's words and the line they point
at. A deny-list of known config errors did the opposite and retried a typo
(`#SBATCH --tim=1:00:00`) a hundred times as the cluster's fault.
"""

from __future__ import annotations

import re
import time
from enum import Enum
from typing import NamedTuple, Sequence

from fray.backends.external import NOT_FOUND, CommandResult
from fray.backends.slurm.script import line_options, long_name

# sbatch's answers after which the job may exist all the same: look for it before submitting again.
MAYBE_SUBMITTED = ("socket timed out", "zero bytes were transmitted", "connection reset")
# Answers a later try can change: the cluster's state, not the job's request (lower case, Slurm 20-24).
TRANSIENT = (
    "unable to contact slurm controller", "socket timed out", "zero bytes were transmitted", "connection reset",
    "connection refused", "communication connection failure", "temporarily unable", "temporarily unavailable",
    "try again", "job queue full", "queue is full", "backup controller in standby", "shutting down",
    "not responding", "job submit limit", "submit limit", "maxsubmit", "required partition not available",
    "inactive or drain", "authentication", "munge", "credential", "transport endpoint", "network is unreachable",
    "no route to host", "slurm_persist_conn", "insane message length",
)


class Answer(str, Enum):
    AMBIGUOUS = "ambiguous"  # it may have been submitted: look for it by name
    TRANSIENT = "transient"  # the cluster's state; retried with backoff
    REFUSED = "refused"  # the job's own request: no retry changes it


def judge(result: CommandResult) -> Answer:
    """What an sbatch that returned no job id means (`result.ok` with no id: it said nothing readable)."""
    low = (result.stderr + "\n" + result.stdout).lower()
    if result.ok or result.timed_out or any(marker in low for marker in MAYBE_SUBMITTED):
        return Answer.AMBIGUOUS
    if result.exit_code == NOT_FOUND or any(marker in low for marker in TRANSIENT):
        return Answer.TRANSIENT  # 127: no sbatch on this host's PATH, which is not the job's fault either
    return Answer.REFUSED


_PREFIX = re.compile(r"^(?:sbatch: )?(?:error: )?(?:Batch job submission failed: )?(?:allocation failure: )?")


def words(result: CommandResult) -> str:
    """sbatch's own words, one line: its error lines without their prefixes, without "Try sbatch --help"."""
    lines = []
    for line in result.stderr.splitlines():
        text = _PREFIX.sub("", line.strip())
        if text and not text.startswith("Try \"sbatch --help\"") and text not in lines:
            lines.append(text)
    return "; ".join(lines) or result.describe()


# Which sbatch options a refusal's words are about, by what they name (lower case).
_TOPICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("partition", ("partition",)),
    ("generic resource", ("gres", "gpus", "gpus-per-node", "gpus-per-task", "tres-per-node")),
    ("gres", ("gres", "gpus", "gpus-per-node", "gpus-per-task", "tres-per-node")),
    ("trackable resource", ("gres", "gpus", "tres-per-node", "licenses")),
    ("time limit", ("time", "time-min")),
    ("account", ("account",)),
    ("qos", ("qos",)),
    ("feature", ("constraint",)),
    ("memory", ("mem", "mem-per-cpu", "mem-per-gpu")),
    ("node count", ("nodes",)),
    ("node name", ("nodelist", "exclude")),
    ("array", ("array",)),
    ("reservation", ("reservation",)),
    ("dependency", ("dependency",)),
    ("node configuration", ("partition", "nodes", "ntasks", "cpus-per-task", "mem", "mem-per-cpu", "gres", "gpus",
                            "constraint", "nodelist")),
)
_OPTION_WORD = re.compile(r"option '?(-{1,2}[A-Za-z][\w-]*)")
_SHORT_WORD = re.compile(r"invalid option -- '?([A-Za-z])")


class Pointer(NamedTuple):
    """Where a refusal points: a line of the script (`line` > 0) or one of fray's flags (`line` 0)."""

    line: int
    text: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.text}" if self.line else self.text


def pointed(said: str, script_text: str, spec: dict[str, object] | None = None) -> list[Pointer]:
    """The `#SBATCH` lines of the script that sbatch's words are about; where none is, the fray flags whose
    sbatch option it is about (`spec`: the run's spec as a dict)."""
    low = said.lower()
    lines = script_text.split("\n")
    sbatch = [(number, line.rstrip("\r")) for number, line in enumerate(lines, start=1) if line.startswith("#SBATCH")]
    named = [m.group(1) for m in _OPTION_WORD.finditer(said)] + [f"-{m.group(1)}" for m in _SHORT_WORD.finditer(said)]
    if named:  # an option sbatch does not take: the line that has it, as written
        found = [Pointer(number, text) for number, text in sbatch if any(_has_token(text, option) for option in named)]
        if found:
            return found
    options: list[str] = []
    for topic, names in _TOPICS:
        if topic in low:
            options += [name for name in names if name not in options]
    found = [Pointer(number, text) for number, text in sbatch
             if any(long_name(option) in options for option in line_options(text))]
    if found or spec is None:
        return found
    return [Pointer(0, f"fray's {flag} (sent to sbatch as --{option})") for option in options
            for flag in [_fray_flag(option, spec)] if flag]


def _fray_flag(option: str, spec: dict[str, object]) -> str:
    """The fray flag, with its value, that became sbatch's `option` for this run; "" when it did not."""
    value = {"cpus-per-task": spec.get("cpus") if (spec.get("cpus") or 1) > 1 else None,  # type: ignore[operator]
             "mem": spec.get("mem_mb"), "gres": spec.get("gpus") or None,
             "partition": ",".join(spec.get("partitions") or []) or None,  # type: ignore[arg-type]
             "nodes": spec.get("replicas") if (spec.get("replicas") or 1) > 1 else None,  # type: ignore[operator]
             "constraint": " ".join(spec.get("constraints") or []) or None}.get(option)  # type: ignore[arg-type]
    if value is None:
        return ""
    flag = {"cpus-per-task": "--cpus", "mem": "--mem", "gres": "--gpus", "partition": "--partitions",
            "nodes": "--replicas", "constraint": "--constraint"}[option]
    return f"{flag} {f'{value}M' if option == 'mem' else value}"


def _has_token(line: str, option: str) -> bool:
    return any(token == option or token.startswith(option + "=") for token in line.removeprefix("#SBATCH").split())


def about_placement(said: str) -> bool:
    """Whether sbatch's words say no node can take the job as asked (which excluding nodes can cause)."""
    low = said.lower()
    return "node configuration is not available" in low or "requested nodes are busy" in low


def refusal(said: str, pointers: Sequence[Pointer], script_name: str) -> str:
    """One line: what sbatch said, and where in the script (or which flag) it points at."""
    if not pointers:
        return f"sbatch refused the job: {said}"
    where = "; ".join(f"{script_name} {p}" if p.line else str(p) for p in pointers)
    return f"sbatch refused the job: {said} ({where})"


class Estimate(NamedTuple):
    """`sbatch --test-only`'s answer for a job it would take: when (epoch; None: not said) and where."""

    start_at: float | None
    nodes: str
    partition: str
    text: str


_TEST_ONLY = re.compile(r"Job \d+ to start at (?P<at>\S+) using \d+ processors on nodes (?P<nodes>\S+)"
                        r"(?: in partition (?P<partition>\S+))?")


def estimate(stderr: str) -> Estimate | None:
    """The start time and nodes `sbatch --test-only` gives (in the controller's local time), None if it gave none."""
    match = _TEST_ONLY.search(stderr)
    if match is None:
        return None
    try:
        at: float | None = time.mktime(time.strptime(match["at"], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        at = None
    return Estimate(at, match["nodes"], match["partition"] or "", _PREFIX.sub("", match.group(0)))
