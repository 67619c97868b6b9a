"""`#FRAY` directives: from a submitted script's text to a `RunSpec`.

Owns the header-block rule, reading options off `#FRAY` lines, and the merge of
defaults <- directives <- CLI flags with the checks that span several fields. The
option table is `fray.core.directive_options` (the CLI and TUI build their flags
and help from it); the value parsers are `fray.core.values`.

    parse_script(text, path)  -> ParsedScript      errors: DirectiveError (file, line, what is valid)
    parse_flag_value(flag, raw) -> (field, value)  errors: UsageError
    build_spec(parsed, cli_overrides, ...) -> RunSpec   errors: UsageError (cross-field)

Directives live in the script's header, as `#SBATCH` lines do for sbatch: the
shebang, comments and blank lines before the first other line. `#SBATCH` lines
there are kept verbatim for the Slurm backend. Pure: it receives text, never
reads files.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Iterator

from fray.core import values
from fray.core.directive_options import BEATS_PER_TIMEOUT, OPTIONS, SUBMIT_SETTLED, DirectiveOption
from fray.core.placement import values as placement_values
from fray.core.model import Mode, RunSpec
from fray.core.values import format_duration
from fray.errors import DirectiveError, UsageError

_DEFAULT = RunSpec()


@dataclass
class ParsedScript:
    name: str | None
    overrides: dict[str, Any]  # RunSpec field -> value, only what the directives set
    sbatch: list[str]
    directive_lines: list[int]


# ---------------------------------------------------------------- value parsers

# ---------------------------------------------------------------- the option table

_BY_FLAG = {option.flag: option for option in OPTIONS}
_SPEC_FIELDS = {option.field for option in OPTIONS} - {"name", *SUBMIT_SETTLED}
# Common sbatch options people put on #FRAY lines by mistake; difflib would
# suggest nonsense for them (--time -> --name).
_SBATCH_ONLY = frozenset(
    "account array cpus-per-task dependency error exclude exclusive gres mail-type mail-user "
    "mem-per-cpu nodelist nodes ntasks ntasks-per-node output partition qos reservation time".split()
)


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
    guess = values.closest("--" + bare, _BY_FLAG)
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
            if position == len(tokens) or (tokens[position].startswith("--") and not option.dash_value):
                raise ValueError(f"{flag} needs a value: {flag} {option.metavar} ({option.help})")
            raw = tokens[position]
            position += 1
        previous = (option, raw)
        yield option, raw


def _stray_word(token: str, previous: tuple[DirectiveOption, str] | None) -> str:
    if token.startswith("#"):
        return "#FRAY lines hold only options: put a comment on a line of its own"
    if previous is None:
        guess = values.closest("--" + token, _BY_FLAG)
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
    # --code, --python, --venv, ... are settled at submit into the spec (fray.state.run_code), not here.
    chosen = {k: v for k, v in {**parsed.overrides, **cli_overrides}.items() if k not in SUBMIT_SETTLED}
    chosen["env"] = {**parsed.overrides.get("env", {}), **cli_overrides.get("env", {})}
    for field in ("constraints", "tolerations", "after", "progress_patterns"):  # repeatable: text -> itself, in order
        merged = {**parsed.overrides.get(field, {}), **cli_overrides.get(field, {})}
        chosen[field] = list(merged.values())
    _fill_heartbeat_defaults(chosen)
    if chosen.get("backend") == "tpu" and chosen.get("tpu") and not chosen.get("runtime_version"):
        from fray.core.tpu_topology import default_runtime  # the generation table: only a TPU run needs it

        chosen["runtime_version"] = default_runtime(chosen["tpu"])  # as gcloud users expect: one per generation
    spec = RunSpec(**chosen, sbatch=list(parsed.sbatch), args=list(args), workdir=workdir)
    check_spec(spec)
    return spec


def _fill_heartbeat_defaults(chosen: dict[str, Any]) -> None:
    # A long interval with the default timeout would declare every run stalled,
    # so the timeout follows the interval unless the user set it.
    if "heartbeat_interval_sec" in chosen and "heartbeat_timeout_sec" not in chosen:
        chosen["heartbeat_timeout_sec"] = max(
            _DEFAULT.heartbeat_timeout_sec, BEATS_PER_TIMEOUT * chosen["heartbeat_interval_sec"]
        )
    # Until the first heartbeat a run is held to the same patience as after it.
    chosen.setdefault("startup_grace_sec", chosen.get("heartbeat_timeout_sec", _DEFAULT.heartbeat_timeout_sec))


def check_spec(spec: RunSpec) -> None:
    """Raise UsageError listing every combination of settings that cannot work."""
    problems = []
    if spec.heartbeat_timeout_sec <= spec.heartbeat_interval_sec:
        suggested = format_duration(BEATS_PER_TIMEOUT * spec.heartbeat_interval_sec)
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
    if spec.retry_args_if_exists is not None and not spec.retry_args:
        problems.append(f"--retry-args-if-exists {spec.retry_args_if_exists} says when to add --retry-args; "
                        "add --retry-args ARGS (like --retry-args '--resume')")
    if spec.health_cmd is None and (
        spec.health_interval_sec != _DEFAULT.health_interval_sec or spec.health_retries != _DEFAULT.health_retries
    ):
        problems.append("--health-interval and --health-retries apply to a health command; add --health-cmd CMD")
    problems += placement_values.placement_problems(spec)
    if problems:
        raise UsageError("these settings do not work together:\n  - " + "\n  - ".join(problems))
