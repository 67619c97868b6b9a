"""The safe settings of a live run: what they are now, reading new values, and writing them.

`fray control config-set RUN KEY=VALUE...` and the dashboard's edit-config
form (`e`) both change settings here. Only policy.SAFE_OVERRIDES may change
(retries, keep-alive, timeouts, grace periods, backoff); values are read as
the `#FRAY` directives read them, and the whole spec is checked again
(runs.set_overrides) before control.json is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fray.core import directives, values
from fray.core.model import Control
from fray.core.policy import SAFE_OVERRIDES
from fray.errors import UsageError
from fray.state import runs
from fray.state.layout import Home


@dataclass(frozen=True)
class Setting:
    """One safe #FRAY option: its field, its flag, its current value as text, and its help."""

    field: str
    flag: str
    text: str
    help: str
    is_flag: bool


def current(home: Home, run_id: str) -> list[Setting]:
    """The settings a live run may change, with the values in force now."""
    meta = runs.read_meta(home, run_id)
    overrides = runs.read_control(home, run_id).overrides
    spec = {**meta.spec.to_dict(), **overrides}
    return [Setting(option.field, option.flag, format_value(option, spec.get(option.field)), option.help,
                    option.is_flag)
            for option in directives.OPTIONS if option.field in SAFE_OVERRIDES]


def format_value(option: directives.DirectiveOption, value: Any) -> str:
    """A value as a directive would write it (`10m`, `3`, `true`); empty when unset."""
    if value is None:
        return ""
    if option.is_flag or isinstance(value, bool):
        return "true" if value else "false"
    if option.metavar == "DURATION":
        return values.format_duration(float(value))
    return str(value)


def parse_setting(item: str) -> tuple[str, Any]:
    """`KEY=VALUE`, KEY a #FRAY option without its dashes: (field, value) as the directive reads it. A KEY
    that is no option at all is told the closest setting config-set accepts (never one it would refuse)."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip("-"):
        raise UsageError(f"{item!r}: expected KEY=VALUE, like max-retries=5")
    flag = "--" + key.strip("-").replace("_", "-")
    if flag not in {option.flag for option in directives.OPTIONS}:
        safe = [option.flag.removeprefix("--") for option in directives.OPTIONS if option.field in SAFE_OVERRIDES]
        guess = values.closest(flag.removeprefix("--"), safe)
        raise UsageError(f"{key!r} is not a setting" + (f"; did you mean {guess}?" if guess else "")
                         + f" (the settings that can change: {', '.join(sorted(safe))})")
    return directives.parse_flag_value(flag, value)


def parse_changes(fields: list[Setting], texts: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(settings that changed, errors by field) from what was typed in a form of `fields`."""
    settings: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for setting in fields:
        text = texts.get(setting.field, setting.text).strip()
        if text == setting.text.strip():
            continue
        if not text:
            errors[setting.field] = f"{setting.flag}: give a value (it was {setting.text or 'unset'})"
            continue
        try:
            field, value = directives.parse_flag_value(setting.flag, text)
        except UsageError as exc:
            errors[setting.field] = str(exc)
            continue
        settings[field] = value
    return settings, errors


def change(home: Home, run_id: str, settings: dict[str, Any]) -> tuple[Control, str]:
    """Write the new settings (the whole spec is checked again): (control record, what happens next)."""
    record = runs.set_overrides(home, run_id, settings)
    shown = ", ".join(f"{key}={value}" for key, value in settings.items())
    return record, f"the daemon applies {shown} now; new attempts use them"
