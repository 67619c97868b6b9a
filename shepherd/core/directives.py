"""`#FRAY` directives: from a submitted script's text to a `RunSpec`.

Owns the option table (`OPTIONS`, which the CLI and TUI build their flags and help
from), the value parsers (durations, sizes, counts, choices, `KEY=VALUE`), the
header-block rule, and the merge of defaults <- directives <- CLI flags with the
checks that span several fields.

    parse_script(text, path)  -> ParsedScript      errors: DirectiveError (file, line, what is valid)
    parse_flag_value(flag, raw) -> (field, value)  errors: UsageError
    build_spec(parsed, cli_overrides, ...) -> RunSpec   errors: UsageError (cross-field)

Directives live in the script's header, as `#SBATCH` lines do for sbatch: the
shebang, comments and blank lines before the first other line. `#SBATCH` lines
there are kept verbatim for the Slurm backend. Pure: it receives text, never
reads files.
"""

from __future__ import annotations

import difflib
import math
import re
import shlex
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from fray.errors import DirectiveError, UsageError
from fray.core.model import PARTITION_FALLBACK_DEFAULTS, Mode, RunSpec
from fray.wrapper import contract

_DEFAULT = RunSpec()
# Missed beats tolerated before a run counts as stalled when the user sets only the
# interval: enough to ride out a slow step or shared-filesystem lag, few enough
# that a hang is noticed within minutes.
_BEATS_PER_TIMEOUT = 6


@dataclass(frozen=True)
class DirectiveOption:
    """One option, as `#FRAY --flag value` and as the CLI flag of the same name.

    `parse` turns the raw text into the field's value or raises ValueError saying
    what would be valid. A repeatable option parses to a one-entry dict, and its
    occurrences merge.
    """

    flag: str
    field: str
    metavar: str
    help: str
    parse: Callable[[str], Any]
    is_flag: bool = False
    repeatable: bool = False


@dataclass
class ParsedScript:
    name: str | None
    overrides: dict[str, Any]  # RunSpec field -> value, only what the directives set
    sbatch: list[str]
    directive_lines: list[int]


# ---------------------------------------------------------------- value parsers

_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
# Units in decreasing order, each at most once: "1h30m", not "30m1h".
_DURATION = re.compile("".join(f"(?:(?P<{u}>{_NUMBER}){u})?" for u in _UNIT_SECONDS))
_DURATION_FORM = "a duration like 90 (seconds), 90s, 5m, 2h, 3d or 1h30m"

# Binary units, as Slurm reads --mem: 4G is 4096M.
_SIZE = re.compile(rf"(?P<n>{_NUMBER})(?:(?P<unit>[kmgt])(?:i?b)?)?")
_UNIT_MB = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
_SIZE_FORM = "a size like 4G, 512M or 4096 (MB)"

_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME_MAX = 128  # meta.json: name maxLength


def parse_duration(text: str) -> float:
    """Seconds from `90`, `1.5`, `90s`, `5m`, `2h`, `3d` or combinations like `1h30m`."""
    lowered = text.strip().lower()
    if re.fullmatch(_NUMBER, lowered):
        seconds = float(lowered)
    else:
        match = _DURATION.fullmatch(lowered)
        if not lowered or match is None:
            raise ValueError(f"expected {_DURATION_FORM}")
        seconds = sum(float(n) * _UNIT_SECONDS[u] for u, n in match.groupdict().items() if n)
    if not math.isfinite(seconds):
        raise ValueError(f"expected {_DURATION_FORM}; this one is too long")
    return seconds


def parse_memory_mb(text: str) -> int:
    """Whole megabytes from `512M`, `4G`, `4GB`, `4GiB`, `1T` or a plain number of MB.

    Fractions round up, so a job never gets less than it asked for.
    """
    match = _SIZE.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(f"expected {_SIZE_FORM}")
    mb = math.ceil(float(match["n"]) * _UNIT_MB[match["unit"] or "m"])
    if mb < 1:
        raise ValueError(f"expected {_SIZE_FORM}, of at least 1M")
    return mb


def format_duration(seconds: float) -> str:
    """`1h30m`, `45s`, `1.5s`: the short form people read, and that parse_duration reads back."""
    if not math.isfinite(seconds):
        raise ValueError(f"cannot format {seconds} as a duration")
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 60:
        return f"{round(seconds, 3):g}s"
    remaining = round(seconds)
    parts = []
    for unit, size in _UNIT_SECONDS.items():
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def _duration(*, positive: bool) -> Callable[[str], float]:
    def parse(text: str) -> float:
        seconds = parse_duration(text)
        if positive and seconds == 0:
            raise ValueError(f"expected {_DURATION_FORM}, longer than 0")
        return seconds

    return parse


def _count(*, minimum: int, example: str) -> Callable[[str], int]:
    at_least = f" of at least {minimum}," if minimum else ""
    form = f"a whole number{at_least} like {example}"

    def parse(text: str) -> int:
        # [0-9] and not \d or int(): int() would also take "+3", "3_000" and "٣".
        if not re.fullmatch(r"[0-9]{1,9}", text.strip()) or int(text) < minimum:
            raise ValueError(f"expected {form}")
        return int(text)

    return parse


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        # "run-once" and "Slurm" are what people type; the stored value is canonical.
        value = text.strip().lower().replace("-", "_")
        if value in choices:
            return value
        guess = _closest(value, choices)
        hint = f"did you mean {guess}? " if guess else ""
        raise ValueError(f"{hint}expected one of: {', '.join(choices)}")

    return parse


def _parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0"):
        return False
    raise ValueError("expected true or false (or no value at all, meaning true)")


def _parse_name(text: str) -> str:
    if not text.strip():
        raise ValueError("expected a non-empty name like train-gpt")
    if len(text) > _NAME_MAX:
        raise ValueError(f"expected a name of at most {_NAME_MAX} characters")
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise ValueError("expected a name without control characters (tabs, newlines, ...)")
    return text


def _parse_probes(text: str) -> list[str]:
    """`gpu,cuda` as a list of preflight probes; `none` as none."""
    names = [name.strip() for name in text.split(",")]
    if names == ["none"]:
        return []
    form = f"probe names separated by commas ({','.join(contract.PROBE_NAMES)}), or none"
    if not all(names):
        raise ValueError(f"expected {form}")
    for name in names:
        if name not in contract.PROBE_NAMES:
            guess = _closest(name, contract.PROBE_NAMES)
            raise ValueError(f"unknown probe {name!r}; {f'did you mean {guess}? ' if guess else ''}expected {form}")
    if len(set(names)) != len(names):
        raise ValueError("each probe may be named once")
    return names


def _parse_health_cmd(text: str) -> str:
    command = text.strip()
    if not command:
        raise ValueError("expected a shell command, like 'curl -sf localhost:8000/health'")
    if command.startswith("-"):
        raise ValueError("a health command cannot start with '-'")
    if "\0" in command or "\n" in command:
        raise ValueError("expected a one-line shell command")
    return command


def _parse_env(text: str) -> dict[str, str]:
    key, has_value, value = text.partition("=")
    if not has_value:
        raise ValueError("expected KEY=VALUE, like WANDB_MODE=offline")
    if not _ENV_KEY.fullmatch(key):
        raise ValueError(
            f"{key!r} is not a variable name: use letters, digits and _, not starting with a digit"
            " (like WANDB_MODE=offline)"
        )
    if key.startswith("FRAY_"):
        raise ValueError(f"{key} is set by fray itself for each attempt; choose a name outside FRAY_*")
    if "\0" in value:
        raise ValueError("an environment value cannot contain a NUL character")
    return {key: value}


_PARTITION_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_VRAM = re.compile(rf"(?P<n>{_NUMBER})\s*(?:g|gb|gib)?")


def _parse_partitions(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not text.strip() or not all(names):
        raise ValueError("expected partition names separated by commas, like a100,h100")
    bad = [name for name in names if not _PARTITION_NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a partition name: use letters, digits, _, . and -")
    if len(set(names)) != len(names):
        raise ValueError("each partition may be named once")
    return names


def _parse_vram(text: str) -> float:
    """GPU memory in GB from `40`, `40G`, `40GB` (as GPUs are sold: an A100 has 40 or 80)."""
    match = _VRAM.fullmatch(text.strip().lower())
    if match is None or float(match["n"]) <= 0:
        raise ValueError("expected GPU memory in GB, like 40 or 80G")
    return float(match["n"])


def _parse_fallback(text: str) -> dict[str, Any]:
    """`N` or `N,DURATION`: fall back after N failures in a row; retry the preferred after DURATION."""
    count, _, retry = text.partition(",")
    form = "N or N,DURATION, like 2 or 2,30m (0 never falls back)"
    if not re.fullmatch(r"[0-9]{1,4}", count.strip()):
        raise ValueError(f"expected {form}")
    settings = dict(PARTITION_FALLBACK_DEFAULTS, after_failures=int(count))
    if retry.strip():
        try:
            settings["retry_preferred_sec"] = parse_duration(retry)
        except ValueError:
            raise ValueError(f"expected {form}") from None
    return settings


# ---------------------------------------------------------------- the option table

OPTIONS: tuple[DirectiveOption, ...] = (
    DirectiveOption("--name", "name", "NAME", "a name for the run, shown by fray list", _parse_name),
    DirectiveOption(
        "--mode", "mode", "MODE",
        f"run_once: retry until it succeeds; indefinite: keep it running (default {_DEFAULT.mode})",
        _choice(tuple(m.value for m in Mode)),
    ),
    DirectiveOption(
        "--max-retries", "max_retries", "N",
        f"workload failures (exit 50) allowed before the run fails (default {_DEFAULT.max_retries})",
        _count(minimum=0, example="3"),
    ),
    DirectiveOption(
        "--max-retries-preemption", "max_retries_preemption", "N",
        "node-side failures allowed: probe, node fault, lost heartbeat, preemption"
        f" (default {_DEFAULT.max_retries_preemption})",
        _count(minimum=0, example="100"),
    ),
    DirectiveOption(
        "--keep-alive", "keep_alive_sec", "DURATION",
        "with --mode indefinite: how long to keep the run going, like 3d (default: until stopped)",
        _duration(positive=True),
    ),
    DirectiveOption(
        "--heartbeat-interval", "heartbeat_interval_sec", "DURATION",
        f"how often the wrapper writes a heartbeat (default {format_duration(_DEFAULT.heartbeat_interval_sec)})",
        _duration(positive=True),
    ),
    DirectiveOption(
        "--heartbeat-timeout", "heartbeat_timeout_sec", "DURATION",
        f"restart after this long without a heartbeat (default {format_duration(_DEFAULT.heartbeat_timeout_sec)},"
        f" or {_BEATS_PER_TIMEOUT} x a longer interval)",
        _duration(positive=True),
    ),
    DirectiveOption(
        "--startup-grace", "startup_grace_sec", "DURATION",
        "time allowed before the first heartbeat (default: the heartbeat timeout)",
        _duration(positive=False),
    ),
    DirectiveOption(
        "--stop-grace", "stop_grace_sec", "DURATION",
        f"time between asking the workload to stop and killing it (default {format_duration(_DEFAULT.stop_grace_sec)})",
        _duration(positive=False),
    ),
    DirectiveOption(
        "--backoff-base", "backoff_base_sec", "DURATION",
        "first delay before restarting a crash loop, doubling after"
        f" (default {format_duration(_DEFAULT.backoff_base_sec)})",
        _duration(positive=False),
    ),
    DirectiveOption(
        "--backoff-max", "backoff_max_sec", "DURATION",
        f"longest delay between restarts (default {format_duration(_DEFAULT.backoff_max_sec)})",
        _duration(positive=False),
    ),
    DirectiveOption(
        "--cpus", "cpus", "N", f"CPU cores to reserve (default {_DEFAULT.cpus})", _count(minimum=1, example="8")
    ),
    DirectiveOption(
        "--mem", "mem_mb", "SIZE", "memory to reserve, like 32G (default: the backend's)", parse_memory_mb
    ),
    DirectiveOption(
        "--gpus", "gpus", "N", f"GPUs to reserve (default {_DEFAULT.gpus})", _count(minimum=0, example="2")
    ),
    DirectiveOption(
        "--partitions", "partitions", "P1,P2",
        "Slurm partitions to try, in this order (default: those whose GPUs fit, by --prefer)", _parse_partitions,
    ),
    DirectiveOption(
        "--min-vram", "min_vram_gb", "GB", "with --gpus: the least memory each GPU must have, like 40", _parse_vram
    ),
    DirectiveOption(
        "--max-vram", "max_vram_gb", "GB", "with --gpus: the most memory each GPU may have, like 48", _parse_vram
    ),
    DirectiveOption(
        "--prefer", "prefer", "min|max",
        f"try the partitions with the least (min) or the most (max) GPU memory first (default {_DEFAULT.prefer})",
        _choice(("min", "max")),
    ),
    DirectiveOption(
        "--partition-fallback", "partition_fallback", "N[,DURATION]",
        "use the next partition after N node-side failures in a row on one; retry the preferred after DURATION"
        f" (default {_DEFAULT.partition_fallback['after_failures']},"
        f"{format_duration(_DEFAULT.partition_fallback['retry_preferred_sec'])})",
        _parse_fallback,
    ),
    DirectiveOption(
        "--backend", "backend", "BACKEND",
        f"where attempts run: local, slurm or tpu (default {_DEFAULT.backend})",
        _choice(("local", "slurm", "tpu")),
    ),
    DirectiveOption(
        "--env", "env", "KEY=VALUE", "set a variable in the workload's environment (repeatable)",
        _parse_env, repeatable=True,
    ),
    DirectiveOption(
        "--progress-timeout", "progress_timeout_sec", "DURATION",
        "show the run as degraded when its reported step has not advanced for this long (default: off)",
        _duration(positive=True),
    ),
    DirectiveOption(
        "--restart-on-progress-stall", "restart_on_progress_stall", "",
        "with --progress-timeout: restart the run when its step stops advancing, not only show it",
        _parse_bool, is_flag=True,
    ),
    DirectiveOption(
        "--clean-exit-ok", "clean_exit_ok", "",
        "treat exit code 0 as success, even in indefinite mode before keep-alive ends",
        _parse_bool, is_flag=True,
    ),
    DirectiveOption(
        "--probes", "probes", "LIST",
        f"run exactly these preflight probes ({','.join(contract.PROBE_NAMES)}, or none)"
        " (default: node, plus gpu,mig,trespassers,cuda with --gpus)",
        _parse_probes,
    ),
    DirectiveOption(
        "--skip-probes", "skip_probes", "LIST", "never run these preflight probes, like trespassers", _parse_probes,
    ),
    DirectiveOption(
        "--probe-timeout", "probe_timeout_sec", "DURATION",
        f"each preflight probe's deadline; a hung probe is a node fault"
        f" (default {format_duration(_DEFAULT.probe_timeout_sec)})",
        _duration(positive=True),
    ),
    DirectiveOption(
        "--min-free-disk", "min_free_disk_mb", "SIZE",
        f"free space the node probe requires on FRAY_HOME and /tmp (default {_DEFAULT.min_free_disk_mb}M)",
        parse_memory_mb,
    ),
    DirectiveOption(
        "--health-cmd", "health_cmd", "CMD",
        "a shell command run while the workload runs, exiting 0 while healthy;"
        " --health-retries failures in a row count as a heartbeat stall",
        _parse_health_cmd,
    ),
    DirectiveOption(
        "--health-interval", "health_interval_sec", "DURATION",
        f"time between health checks, and each check's deadline"
        f" (default {format_duration(_DEFAULT.health_interval_sec)})",
        _duration(positive=True),
    ),
    DirectiveOption(
        "--health-retries", "health_retries", "N",
        f"health checks failed in a row that count as a stall (default {_DEFAULT.health_retries})",
        _count(minimum=1, example="3"),
    ),
)

_BY_FLAG = {option.flag: option for option in OPTIONS}
_SPEC_FIELDS = {option.field for option in OPTIONS} - {"name"}
# Common sbatch options people put on #FRAY lines by mistake; difflib would
# suggest nonsense for them (--time -> --name).
_SBATCH_ONLY = frozenset(
    "account array constraint cpus-per-task dependency error exclude exclusive gres mail-type mail-user "
    "mem-per-cpu nodelist nodes ntasks ntasks-per-node output partition qos reservation time".split()
)


def _closest(word: str, choices: Any) -> str | None:
    matches = difflib.get_close_matches(word, list(choices), n=1)
    return matches[0] if matches else None


def _option_for(flag: str) -> DirectiveOption:
    """The option named `flag`, or ValueError saying what was probably meant."""
    option = _BY_FLAG.get(flag)
    if option is not None:
        return option
    bare = flag.lstrip("-")
    if bare in _SBATCH_ONLY:
        raise ValueError(
            f"unknown option {flag}: it is an sbatch option, so put it on an #SBATCH line (#SBATCH --{bare}=...)"
        )
    guess = _closest("--" + bare, _BY_FLAG)
    if guess:
        raise ValueError(f"unknown option {flag}; did you mean {guess}?")
    raise ValueError(f"unknown option {flag}; valid options: {', '.join(_BY_FLAG)}")


def _parse_value(option: DirectiveOption, raw: str) -> Any:
    try:
        return option.parse(raw)
    except ValueError as exc:
        raise ValueError(f"{option.flag} {shlex.quote(raw)}: {exc}") from None


def parse_flag_value(flag: str, raw: str) -> tuple[str, Any]:
    """(field, value) for a CLI flag, parsed as the directive of the same name would be.

    `--env` gives a one-entry dict; a boolean flag takes "true"/"false".
    """
    try:
        option = _option_for(flag)
        return option.field, _parse_value(option, raw)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


# ---------------------------------------------------------------- reading a script

_DIRECTIVE = re.compile(r"#FRAY(?=\s|$)")
_STRING_START = re.compile(r"[rRuUbBfF]{0,2}['\"]")


def parse_script(text: str, path: str) -> ParsedScript:
    """The `#FRAY` settings and `#SBATCH` lines of a script's header block."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    header = _header_length(lines)
    _reject_late_directives(lines, header, path)
    parsed = ParsedScript(name=None, overrides={}, sbatch=[], directive_lines=[])
    first_seen: dict[Any, int] = {}
    for line_no, line in enumerate(lines[:header], start=1):
        if line.startswith("#SBATCH"):
            parsed.sbatch.append(line)
        elif _DIRECTIVE.match(line.lstrip()):
            parsed.directive_lines.append(line_no)
            _apply_directive(parsed, first_seen, line, line_no, path)
    return parsed


def _header_length(lines: list[str]) -> int:
    """How many lines the header block has: blank and comment lines up to the first other one."""
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return index
    return len(lines)


def _reject_late_directives(lines: list[str], header: int, path: str) -> None:
    # Only column 0 counts here: an indented "#FRAY" after the header sits inside
    # code (a function, a heredoc) and was never meant as a directive.
    for index in range(header + 1, len(lines)):
        if _DIRECTIVE.match(lines[index]):
            first = header + 1
            problem = (
                f"#FRAY directives must come before the first command (line {first}); "
                f"move this line above line {first}"
            )
            if _is_python(lines, path) and _STRING_START.match(lines[header].lstrip()):
                problem += (
                    ". In a Python script the module docstring counts as code,"
                    " so directives go before the docstring too"
                )
            raise DirectiveError(path, index + 1, lines[index], problem)


def _is_python(lines: list[str], path: str) -> bool:
    return path.endswith(".py") or (lines[0].startswith("#!") and "python" in lines[0])


def _apply_directive(
    parsed: ParsedScript, first_seen: dict[Any, int], line: str, line_no: int, path: str
) -> None:
    body = _DIRECTIVE.sub("", line.lstrip(), count=1)
    try:
        tokens = shlex.split(body)
    except ValueError as exc:
        problem = f"cannot split this line into options: {exc} (check the quotes)"
        raise DirectiveError(path, line_no, line, problem) from None
    try:
        for option, raw in _read_options(tokens):
            value = _parse_value(option, raw)
            _record(parsed, first_seen, option, value, line_no)
    except ValueError as exc:
        raise DirectiveError(path, line_no, line, str(exc)) from None


def _read_options(tokens: list[str]) -> Iterator[tuple[DirectiveOption, str]]:
    """Each option with its raw value (`--opt value`, `--opt=value`, or a bare flag)."""
    position = 0
    previous: tuple[DirectiveOption, str] | None = None
    while position < len(tokens):
        token = tokens[position]
        position += 1
        if not token.startswith("-"):
            raise ValueError(_stray_word(token, previous))
        flag, has_value, raw = token.partition("=")
        option = _option_for(flag)
        if option.is_flag and not has_value:
            raw = "true"
        elif not has_value:
            if position == len(tokens) or tokens[position].startswith("--"):
                raise ValueError(f"{flag} needs a value: {flag} {option.metavar} ({option.help})")
            raw = tokens[position]
            position += 1
        previous = (option, raw)
        yield option, raw


def _stray_word(token: str, previous: tuple[DirectiveOption, str] | None) -> str:
    if token.startswith("#"):
        return "#FRAY lines hold only options: put a comment on a line of its own"
    if previous is None:
        guess = _closest("--" + token, _BY_FLAG)
        hint = f"; did you mean {guess}?" if guess else ""
        return f"expected an option like --cpus 8, got {shlex.quote(token)}{hint}"
    option, raw = previous
    if option.is_flag:
        return f"{option.flag} takes no value, got {shlex.quote(token)}"
    return (
        f"unexpected {shlex.quote(token)} after {option.flag} {shlex.quote(raw)}: each option takes one value; "
        f"quote a value that contains spaces ({option.flag} {shlex.quote(raw + ' ' + token)})"
    )


def _record(
    parsed: ParsedScript, first_seen: dict[Any, int], option: DirectiveOption, value: Any, line_no: int
) -> None:
    """Store one setting, refusing a second one for the same field (or --env key)."""
    key: Any = (option.field, *value) if option.repeatable else option.field
    label = f"{option.flag} {next(iter(value))}" if option.repeatable else option.flag
    if key in first_seen:
        earlier = first_seen[key]
        where = f"twice on line {line_no}" if earlier == line_no else f"on line {earlier} and again on line {line_no}"
        raise ValueError(f"{label} is set {where}; keep one")
    first_seen[key] = line_no
    if option.field == "name":
        parsed.name = value
    elif option.repeatable:
        parsed.overrides.setdefault(option.field, {}).update(value)
    else:
        parsed.overrides[option.field] = value


# ---------------------------------------------------------------- the run spec


def build_spec(
    parsed: ParsedScript, cli_overrides: dict[str, Any], *, workdir: str, args: list[str]
) -> RunSpec:
    """RunSpec from defaults <- directives <- CLI flags, checked as a whole.

    `cli_overrides` maps RunSpec fields (as `parse_flag_value` returns them) to
    values; the run's name is not part of the spec, so resolve it apart
    (`cli_name or parsed.name`).
    """
    unknown = set(cli_overrides) - _SPEC_FIELDS
    if unknown:
        raise ValueError(f"build_spec: not settable RunSpec fields: {', '.join(sorted(unknown))}")
    chosen = {**parsed.overrides, **cli_overrides}
    chosen["env"] = {**parsed.overrides.get("env", {}), **cli_overrides.get("env", {})}
    _fill_heartbeat_defaults(chosen)
    spec = RunSpec(**chosen, sbatch=list(parsed.sbatch), args=list(args), workdir=workdir)
    check_spec(spec)
    return spec


def _fill_heartbeat_defaults(chosen: dict[str, Any]) -> None:
    # A long interval with the default timeout would declare every run stalled,
    # so the timeout follows the interval unless the user set it.
    if "heartbeat_interval_sec" in chosen and "heartbeat_timeout_sec" not in chosen:
        chosen["heartbeat_timeout_sec"] = max(
            _DEFAULT.heartbeat_timeout_sec, _BEATS_PER_TIMEOUT * chosen["heartbeat_interval_sec"]
        )
    # Until the first heartbeat a run is held to the same patience as after it.
    chosen.setdefault("startup_grace_sec", chosen.get("heartbeat_timeout_sec", _DEFAULT.heartbeat_timeout_sec))


def check_spec(spec: RunSpec) -> None:
    """Raise UsageError listing every combination of settings that cannot work."""
    problems = []
    if spec.heartbeat_timeout_sec <= spec.heartbeat_interval_sec:
        suggested = format_duration(_BEATS_PER_TIMEOUT * spec.heartbeat_interval_sec)
        problems.append(
            f"--heartbeat-timeout ({format_duration(spec.heartbeat_timeout_sec)}) must be longer than "
            f"--heartbeat-interval ({format_duration(spec.heartbeat_interval_sec)}), or one late heartbeat "
            f"restarts the run; try --heartbeat-timeout {suggested}"
        )
    if spec.keep_alive_sec is not None and spec.mode != Mode.INDEFINITE.value:
        problems.append(
            f"--keep-alive ({format_duration(spec.keep_alive_sec)}) only applies with --mode indefinite "
            f"(this run is {spec.mode}); add --mode indefinite or drop --keep-alive"
        )
    if spec.backoff_max_sec < spec.backoff_base_sec:
        problems.append(
            f"--backoff-max ({format_duration(spec.backoff_max_sec)}) must be at least "
            f"--backoff-base ({format_duration(spec.backoff_base_sec)})"
        )
    if spec.min_vram_gb is not None and spec.max_vram_gb is not None and spec.min_vram_gb > spec.max_vram_gb:
        problems.append(f"--min-vram ({spec.min_vram_gb:g}) must be at most --max-vram ({spec.max_vram_gb:g})")
    if (spec.min_vram_gb is not None or spec.max_vram_gb is not None) and not spec.gpus:
        problems.append("--min-vram and --max-vram choose among GPUs; add --gpus N")
    if spec.gpus and spec.backend == "tpu":
        problems.append(f"--gpus {spec.gpus} cannot be met on --backend tpu (TPU VMs have no GPUs); drop --gpus")
    both = sorted(set(spec.probes or ()) & set(spec.skip_probes))
    if both:
        problems.append(f"--probes and --skip-probes both name {', '.join(both)}; keep each probe in one")
    if spec.health_cmd is None and (
        spec.health_interval_sec != _DEFAULT.health_interval_sec or spec.health_retries != _DEFAULT.health_retries
    ):
        problems.append("--health-interval and --health-retries apply to a health command; add --health-cmd CMD")
    if problems:
        raise UsageError("these settings do not work together:\n  - " + "\n  - ".join(problems))
