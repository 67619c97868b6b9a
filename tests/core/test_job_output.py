"""Directives that read what a job already does: a bad pattern is refused at submit with where it is wrong."""

from __future__ import annotations

import pytest

from fray.core.directives import build_spec, parse_script
from fray.errors import DirectiveError, UsageError


def parsed(*lines: str):
    return parse_script("#!/usr/bin/env python3\n" + "".join(f"#FRAY {line}\n" for line in lines) + "print()\n",
                        "train.py")


def test_a_pattern_names_what_it_reports_and_patterns_add_up():
    spec = build_spec(parsed("--progress-pattern 'iter (?P<step>\\d+): loss (?P<loss>[0-9.]+)'",
                             "--progress-pattern '(?P<step>\\d+)/(?P<total>\\d+) \\['"), {}, workdir="/w", args=[])
    assert spec.progress_patterns == ["iter (?P<step>\\d+): loss (?P<loss>[0-9.]+)", "(?P<step>\\d+)/(?P<total>\\d+) \\["]


@pytest.mark.parametrize(("pattern", "says"), [
    ("'iter (?P<step>\\d+: loss'", "not a valid regular expression: missing ), unterminated subpattern at position 5 "
                                   "(after 'iter ')"),
    ("'iter [0-9]+'", "it names no group"),
    ("'(?P<step>\\d*)'", "it matches an empty line"),
])
def test_a_bad_pattern_is_refused_with_the_file_line_and_position(pattern, says):
    with pytest.raises(DirectiveError) as info:
        parsed("--name ok", f"--progress-pattern {pattern}")
    assert info.value.line_no == 3 and says in str(info.value)


def test_retry_args_may_start_with_a_dash_on_a_fray_line_and_split_as_a_shell_would():
    spec = build_spec(parsed("--retry-args --init_from=resume --retry-args-if-exists out/ckpt.pt"), {},
                      workdir="/w", args=[])
    assert spec.retry_args == ["--init_from=resume"] and spec.retry_args_if_exists == "out/ckpt.pt"
    spec = build_spec(parsed("--retry-args \"--resume --ckpt 'last one'\""), {}, workdir="/w", args=[])
    assert spec.retry_args == ["--resume", "--ckpt", "last one"]


def test_a_condition_without_arguments_to_add_is_refused():
    with pytest.raises(UsageError, match="--retry-args-if-exists out/ckpt.pt says when to add --retry-args"):
        build_spec(parsed("--retry-args-if-exists out/ckpt.pt"), {}, workdir="/w", args=[])
