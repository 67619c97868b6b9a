"""Values of directives and flags: durations, sizes, counts, choices, names, env, probes, partitions.

Each parser takes the text a person wrote and returns the value, or raises
ValueError with the form that would be valid; `directives` adds the file, line
and flag. Pure.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any, Callable

from fray.core.model import PARTITION_FALLBACK_DEFAULTS
from fray.wrapper import contract

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


def duration(*, positive: bool) -> Callable[[str], float]:
    def parse(text: str) -> float:
        seconds = parse_duration(text)
        if positive and seconds == 0:
            raise ValueError(f"expected {_DURATION_FORM}, longer than 0")
        return seconds

    return parse


def duration_or_off(text: str) -> float | None:
    """A positive duration, or `off` / 0 for none (a check that can be turned off)."""
    if text.strip().lower() in ("off", "none", "0"):
        return None
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise ValueError(f"expected {_DURATION_FORM}, or off") from None
    return seconds or None


def count(*, minimum: int, example: str) -> Callable[[str], int]:
    at_least = f" of at least {minimum}," if minimum else ""
    form = f"a whole number{at_least} like {example}"

    def parse(text: str) -> int:
        # [0-9] and not \d or int(): int() would also take "+3", "3_000" and "٣".
        if not re.fullmatch(r"[0-9]{1,9}", text.strip()) or int(text) < minimum:
            raise ValueError(f"expected {form}")
        return int(text)

    return parse


def choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        # "run-once" and "Slurm" are what people type; the stored value is canonical.
        value = text.strip().lower().replace("-", "_")
        if value in choices:
            return value
        guess = closest(value, choices)
        hint = f"did you mean {guess}? " if guess else ""
        raise ValueError(f"{hint}expected one of: {', '.join(choices)}")

    return parse


def parse_text(what: str) -> Callable[[str], str]:
    """Any non-empty text (a path, a name), checked where it is used."""

    def parse(text: str) -> str:
        if not text.strip():
            raise ValueError(f"expected {what}, got nothing")
        return text

    return parse


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0"):
        return False
    raise ValueError("expected true or false (or no value at all, meaning true)")


def parse_name(text: str) -> str:
    """A run name: printable characters (spaces and punctuation too), at most 128, not starting with `-`."""
    if not text.strip():
        raise ValueError("expected a non-empty name like train-gpt")
    if len(text) > _NAME_MAX:
        raise ValueError(f"expected a name of at most {_NAME_MAX} characters")
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise ValueError("expected a name without control characters (tabs, newlines, ...)")
    if text.startswith("-"):
        # `--name --help` is a forgotten value, not a name: refused here, never a crash loop later.
        raise ValueError(f"a name cannot start with '-' ({text!r} looks like an option: did --name lose its value?)")
    return text


def parse_probes(text: str) -> list[str]:
    """`gpu,cuda` as a list of preflight probes; `none` as none."""
    names = [name.strip() for name in text.split(",")]
    if names == ["none"]:
        return []
    form = f"probe names separated by commas ({','.join(contract.PROBE_NAMES)}), or none"
    if not all(names):
        raise ValueError(f"expected {form}")
    for name in names:
        if name not in contract.PROBE_NAMES:
            guess = closest(name, contract.PROBE_NAMES)
            raise ValueError(f"unknown probe {name!r}; {f'did you mean {guess}? ' if guess else ''}expected {form}")
    if len(set(names)) != len(names):
        raise ValueError("each probe may be named once")
    return names


def parse_health_cmd(text: str) -> str:
    command = text.strip()
    if not command:
        raise ValueError("expected a shell command, like 'curl -sf localhost:8000/health'")
    if command.startswith("-"):
        raise ValueError("a health command cannot start with '-'")
    if "\0" in command or "\n" in command:
        raise ValueError("expected a one-line shell command")
    return command


def parse_env(text: str) -> dict[str, str]:
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


def parse_partitions(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not text.strip() or not all(names):
        raise ValueError("expected partition names separated by commas, like a100,h100")
    bad = [name for name in names if not _PARTITION_NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a partition name: use letters, digits, _, . and -")
    if len(set(names)) != len(names):
        raise ValueError("each partition may be named once")
    return names


def parse_vram(text: str) -> float:
    """GPU memory in GB from `40`, `40G`, `40GB` (as GPUs are sold: an A100 has 40 or 80)."""
    match = _VRAM.fullmatch(text.strip().lower())
    if match is None or float(match["n"]) <= 0:
        raise ValueError("expected GPU memory in GB, like 40 or 80G")
    return float(match["n"])


def parse_fallback(text: str) -> dict[str, Any]:
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




def closest(word: str, choices: Any) -> str | None:
    import difflib  # only a mistake needs it: every `fray status` imports this module

    matches = difflib.get_close_matches(word, list(choices), n=1)
    return matches[0] if matches else None


_CLOUD_WORD = re.compile(r"[a-z0-9][a-z0-9_.-]*")


def parse_zone_word(text: str) -> str:
    """A zone or runtime version: lowercase letters, digits, `_`, `.` and `-`."""
    if not _CLOUD_WORD.fullmatch(text.strip()):
        raise ValueError(f"{text!r}: expected lowercase letters, digits, _, . and -, like us-west4-a")
    return text.strip()


def parse_zones(text: str) -> list[str]:
    zones = [parse_zone_word(word) for word in text.split(",")]
    if len(set(zones)) != len(zones):
        raise ValueError("each zone may be named once")
    return zones


def parse_tpu_type(text: str) -> str:
    """An accelerator type this version knows the shape of (v2/v3/v4/v5p-N cores, v5litepod/v6e-N chips)."""
    word = parse_zone_word(text)
    generation, _, count = word.rpartition("-")
    if generation not in ("v2", "v3", "v4", "v5p", "v5litepod", "v6e") or not count.isdigit():
        raise ValueError(f"{text!r}: expected an accelerator type like v4-32, v5p-8, v5litepod-16 or v6e-8")
    return word
