"""`#FRAY` directives: scripts in, settings or line-numbered errors out. Pure and fast."""

from __future__ import annotations

import dataclasses

import pytest

from fray.core import validation
from fray.core.directive_options import SUBMIT_SETTLED
from fray.core.directives import OPTIONS, ParsedScript, build_spec, parse_flag_value, parse_script
from fray.core.values import format_duration, parse_duration, parse_memory_mb
from fray.errors import DirectiveError, UsageError
from fray.core.model import RunSpec

EXAMPLE = """\
#!/bin/bash
#FRAY --name train-gpt --mode indefinite --keep-alive 3d
#FRAY --cpus 8 --mem 32G --gpus 2
#FRAY --env WANDB_MODE=offline --env "MSG=hello world"
#SBATCH --partition=a100
#SBATCH --time=04:00:00
python train.py
"""


def script(*directives: str, body: str = "python train.py\n") -> str:
    return "#!/bin/bash\n" + "".join(f"#FRAY {d}\n" for d in directives) + body


def parse(*directives: str) -> ParsedScript:
    return parse_script(script(*directives), "job.sh")


def error_of(text: str, path: str = "job.sh") -> DirectiveError:
    with pytest.raises(DirectiveError) as info:
        parse_script(text, path)
    return info.value


def spec_of(parsed: ParsedScript, **cli: object) -> RunSpec:
    return build_spec(parsed, dict(cli), workdir="/work", args=["--lr", "3e-4"])


# ---------------------------------------------------------------- the example


def test_example_script() -> None:
    parsed = parse_script(EXAMPLE, "train.sh")
    assert parsed == ParsedScript(
        name="train-gpt",
        overrides={
            "mode": "indefinite",
            "keep_alive_sec": 3 * 86400,
            "cpus": 8,
            "mem_mb": 32 * 1024,
            "gpus": 2,
            "env": {"WANDB_MODE": "offline", "MSG": "hello world"},
        },
        sbatch=["#SBATCH --partition=a100", "#SBATCH --time=04:00:00"],
        directive_lines=[2, 3, 4],
    )


def test_example_spec_matches_the_schema() -> None:
    spec = spec_of(parse_script(EXAMPLE, "train.sh"))
    import jsonschema  # a test dependency: missing, it must fail, not skip

    meta = validation.load_schema("meta")
    jsonschema.validate(spec.to_dict(), {"$defs": meta["$defs"], "$ref": "#/$defs/spec"})
    assert spec.sbatch == ["#SBATCH --partition=a100", "#SBATCH --time=04:00:00"]
    assert (spec.args, spec.workdir) == (["--lr", "3e-4"], "/work")


# ---------------------------------------------------------------- every option, every form

EVERY_OPTION = [
    ("--name train-gpt", "name", "train-gpt"),
    ("--mode indefinite", "mode", "indefinite"),
    ("--mode run-once", "mode", "run_once"),
    ("--max-retries 5", "max_retries", 5),
    ("--max-retries-preemption 0", "max_retries_preemption", 0),
    ("--keep-alive 3d", "keep_alive_sec", 259200.0),
    ("--heartbeat-interval 30s", "heartbeat_interval_sec", 30.0),
    ("--heartbeat-timeout 5m", "heartbeat_timeout_sec", 300.0),
    ("--startup-grace 0", "startup_grace_sec", 0.0),
    ("--stop-grace 1m30s", "stop_grace_sec", 90.0),
    ("--backoff-base 1.5", "backoff_base_sec", 1.5),
    ("--backoff-max 2h", "backoff_max_sec", 7200.0),
    ("--cpus 8", "cpus", 8),
    ("--mem 4GB", "mem_mb", 4096),
    ("--gpus 2", "gpus", 2),
    ("--partitions a100,h100", "partitions", ["a100", "h100"]),
    ("--min-vram 40", "min_vram_gb", 40.0),
    ("--max-vram 80GB", "max_vram_gb", 80.0),
    ("--prefer max", "prefer", "max"),
    ("--partition-fallback 3,10m", "partition_fallback", {"after_failures": 3, "retry_preferred_sec": 600.0}),
    ("--backend slurm", "backend", "slurm"),
    ("--tpu v5litepod-16", "tpu", "v5litepod-16"),
    ("--zone us-west4-a,us-east1-d", "zones", ["us-west4-a", "us-east1-d"]),
    ("--runtime-version tpu-ubuntu2204-base", "runtime_version", "tpu-ubuntu2204-base"),
    ("--spot", "spot", True),
    ("--preemptible", "preemptible", True),
    ("--reserved", "reserved", True),
    ("--queued", "queued", True),
    ("--env WANDB_MODE=offline", "env", {"WANDB_MODE": "offline"}),
    ("--clean-exit-ok", "clean_exit_ok", True),
    ("--progress-timeout 10m", "progress_timeout_sec", 600.0),
    ("--progress-timeout off", "progress_timeout_sec", None),
    ("--restart-on-progress-stall", "restart_on_progress_stall", True),
    ("--idle-timeout 2m", "idle_timeout_sec", 120.0),
    ("--progress-pattern 'iter (?P<step>[0-9]+)'", "progress_patterns", {"iter (?P<step>[0-9]+)": "iter (?P<step>[0-9]+)"}),
    ("--progress-tensorboard runs/", "progress_tensorboard", "runs/"),
    ("--retry-args --init_from=resume", "retry_args", ["--init_from=resume"]),
    ("--retry-args '--resume --ckpt last'", "retry_args", ["--resume", "--ckpt", "last"]),
    ("--retry-args-if-exists out/ckpt.pt", "retry_args_if_exists", "out/ckpt.pt"),
    ("--idle-timeout 0", "idle_timeout_sec", None),
    ("--retry-window 6h", "retry_window_sec", 21600.0),
    ("--retry-window off", "retry_window_sec", None),
    ("--probes gpu,cuda", "probes", ["gpu", "cuda"]),
    ("--probes none", "probes", []),
    ("--skip-probes trespassers", "skip_probes", ["trespassers"]),
    ("--probe-timeout 30s", "probe_timeout_sec", 30.0),
    ("--min-free-disk 10G", "min_free_disk_mb", 10240),
    ("--health-cmd 'curl -sf localhost:8000/health'", "health_cmd", "curl -sf localhost:8000/health"),
    ("--health-interval 1m", "health_interval_sec", 60.0),
    ("--health-retries 5", "health_retries", 5),
    ("--constraint gpu-type=h100", "constraints", {"gpu-type=h100": "gpu-type=h100"}),
    ("--tolerate spot", "tolerations", {"spot": "spot"}),
    ("--replicas 4", "replicas", 4),
    ("--group-by tpu-name", "group_by", "tpu-name"),
    ("--priority batch", "priority", "batch"),
    ("--scheduling-timeout 2h", "scheduling_timeout_sec", 7200.0),
    ("--scheduling-timeout 10m", "scheduling_timeout_sec", 600.0),
    ("--scheduling-timeout off", "scheduling_timeout_sec", None),
    ("--after train", "after", {"train:ok": "train:ok"}),
    ("--after 20261122-101530-train-3fa2:any", "after", {"20261122-101530-train-3fa2:any": "20261122-101530-train-3fa2:any"}),
    ("--code ../project", "code", "../project"),
    ("--code none", "code", "none"),
    ("--workdir /scratch/me", "workdir", "/scratch/me"),
    ("--python /usr/bin/python3.11", "python", "/usr/bin/python3.11"),
    ("--venv .venv", "venv", ".venv"),
    ("--conda torch", "conda", "torch"),
]


@pytest.mark.parametrize(("directive", "field", "value"), EVERY_OPTION)
@pytest.mark.parametrize("form", ["space", "equals"])
def test_every_option_in_both_forms(directive: str, field: str, value: object, form: str) -> None:
    if form == "equals" and " " in directive:
        directive = directive.replace(" ", "=", 1)
    parsed = parse(directive)
    got = parsed.name if field == "name" else parsed.overrides[field]
    assert got == value


def test_a_default_on_flag_is_turned_off_with_false() -> None:
    assert parse("--restart-on-progress-stall=false").overrides == {"restart_on_progress_stall": False}


def test_the_table_above_covers_every_option() -> None:
    assert {d.split()[0] for d, _, _ in EVERY_OPTION} == {o.flag for o in OPTIONS}


def test_option_table_is_consistent() -> None:
    spec_fields = {f.name for f in dataclasses.fields(RunSpec)}
    assert len({o.flag for o in OPTIONS}) == len(OPTIONS)
    for option in OPTIONS:
        assert option.flag.startswith("--")
        assert option.field in spec_fields | {"name", *SUBMIT_SETTLED}
        assert option.help and "\n" not in option.help
        assert bool(option.metavar) != option.is_flag


def test_only_what_the_directives_set_is_returned() -> None:
    parsed = parse("--cpus 2")
    assert parsed.overrides == {"cpus": 2}
    assert parsed.name is None


def test_several_options_on_one_line_and_across_lines() -> None:
    parsed = parse("--cpus 2 --gpus=1 --clean-exit-ok --mem 512M", "--backend tpu")
    assert parsed.overrides == {"cpus": 2, "gpus": 1, "clean_exit_ok": True, "mem_mb": 512, "backend": "tpu"}
    assert parsed.directive_lines == [2, 3]


def test_a_bare_fray_line_is_harmless() -> None:
    assert parse("").overrides == {}


def test_boolean_flag_takes_an_explicit_value_only_after_equals() -> None:
    assert parse("--clean-exit-ok=false").overrides == {"clean_exit_ok": False}
    error = error_of(script("--clean-exit-ok yes"))
    assert "--clean-exit-ok takes no value, got yes" in error.problem


# ---------------------------------------------------------------- value parsers


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90), ("90s", 90), ("1.5", 1.5), ("5m", 300), ("2h", 7200), ("3d", 259200),
        ("1h30m", 5400), ("1m30s", 90), ("1d12h", 129600), ("1.5h", 5400), ("2H", 7200), (" 10s ", 10), ("0", 0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "abc", "5x", "30m1h", "1h 30m", "-5", "1e3", "inf", "nan", "5mm", "9" * 400])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration like 90"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "mb"),
    [
        ("512M", 512), ("4G", 4096), ("4GB", 4096), ("4GiB", 4096), ("4g", 4096), ("1T", 1048576),
        ("4096", 4096), ("4096MB", 4096), ("1.5G", 1536), ("512K", 1), ("1.2", 2),
    ],
)
def test_parse_memory_mb(text: str, mb: int) -> None:
    assert parse_memory_mb(text) == mb


@pytest.mark.parametrize("text", ["4X", "", "G", "-1G", "4B", "4 G", "0", "0G", "1e3"])
def test_parse_memory_mb_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected a size like 4G, 512M or 4096 \(MB\)"):
        parse_memory_mb(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(45, "45s"), (1.5, "1.5s"), (0, "0s"), (60, "1m"), (90, "1m30s"), (5400, "1h30m"), (259200, "3d"),
     (90061, "1d1h1m1s"), (-90, "-1m30s")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("seconds", [0, 1, 59, 60, 61, 3599, 3600, 86399, 86400, 1234567, 0.25])
def test_format_duration_reads_back(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    ("directive", "problem"),
    [
        ("--mem 4X", "--mem 4X: expected a size like 4G, 512M or 4096 (MB)"),
        ("--cpus 2.5", "--cpus 2.5: expected a whole number like 8"),
        ("--gpus -1", "--gpus -1: expected a whole number like 2"),
        ("--max-retries +3", "--max-retries +3: expected a whole number like 3"),
        ("--keep-alive soon", "--keep-alive soon: expected a duration like 90 (seconds), 90s, 5m, 2h, 3d or 1h30m"),
        ("--heartbeat-interval 0", "--heartbeat-interval 0: expected a duration like 90 (seconds), 90s, 5m"),
        ("--name ''", "--name '': expected a non-empty name like train-gpt"),
        ("--env WANDB_MODE", "--env WANDB_MODE: expected KEY=VALUE, like WANDB_MODE=offline"),
        ("--env 1X=a", "'1X' is not a variable name: use letters, digits and _, not starting with a digit"),
        ("--env MY-VAR=a", "'MY-VAR' is not a variable name"),
        ("--env FRAY_RUN_ID=x", "FRAY_RUN_ID is set by fray itself"),
        ("--clean-exit-ok=maybe", "--clean-exit-ok maybe: expected true or false"),
    ],
)
def test_bad_values_say_what_is_valid(directive: str, problem: str) -> None:
    error = error_of(script("--cpus 1", directive))
    assert error.line_no == 3
    assert problem in error.problem


def test_bad_choice_lists_the_choices_and_guesses() -> None:
    error = error_of(script("--mode indefinte"))
    assert "did you mean indefinite?" in error.problem
    assert "expected one of: run_once, indefinite" in error.problem
    error = error_of(script("--backend k8s"))
    assert error.problem == "--backend k8s: expected one of: local, slurm, tpu"


def test_name_rejects_control_characters_and_long_names() -> None:
    assert "without control characters" in error_of(script('--name "a\tb"')).problem
    assert "at most 128 characters" in error_of(script("--name " + "x" * 129)).problem


# ---------------------------------------------------------------- the header block


def test_header_allows_shebang_comments_and_blank_lines() -> None:
    text = "#!/bin/bash\n\n# train the model\n#FRAY --cpus 2\n   \n  #FRAY --gpus 1\n# done\necho hi\n"
    parsed = parse_script(text, "job.sh")
    assert parsed.overrides == {"cpus": 2, "gpus": 1}
    assert parsed.directive_lines == [4, 6]


def test_directive_after_the_first_command_is_an_error() -> None:
    text = "#!/bin/bash\n#FRAY --cpus 2\nset -e\n\n#FRAY --gpus 1\n"
    error = error_of(text)
    assert (error.path, error.line_no, error.text) == ("job.sh", 5, "#FRAY --gpus 1")
    assert "must come before the first command (line 3)" in error.problem
    assert "move this line above line 3" in error.problem
    assert "docstring" not in error.problem
    assert str(error).startswith("job.sh:5: ")


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("train.py", '"""Train a model."""\n#FRAY --cpus 2\nimport torch\n'),
        ("train", '#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\nr"""Train.\n\n#FRAY --cpus 2\n"""\n'),
    ],
)
def test_python_docstring_counts_as_a_command(path: str, text: str) -> None:
    error = error_of(text, path)
    first = 1 if path.endswith(".py") else 3
    assert f"move this line above line {first}" in error.problem
    assert "directives go before the docstring too" in error.problem


def test_python_directives_before_the_docstring_work() -> None:
    text = '#!/usr/bin/env python\n#FRAY --gpus 1\n"""Train."""\nimport torch\n'
    assert parse_script(text, "train.py").overrides == {"gpus": 1}


def test_indented_fray_after_the_header_is_code_not_a_directive() -> None:
    text = script("--cpus 2", body="f() {\n  #FRAY --gpus 1\n}\n")
    assert parse_script(text, "job.sh").overrides == {"cpus": 2}


def test_lookalikes_are_plain_comments() -> None:
    text = "#!/bin/bash\n# FRAY --cpus 2\n#FRAYED --cpus 2\n#fray --cpus 2\necho\n"
    assert parse_script(text, "job.sh").directive_lines == []


def test_crlf_line_endings() -> None:
    text = "#!/bin/bash\r\n#FRAY --cpus 2\r\n#SBATCH --time=1:00\r\necho\r\n"
    parsed = parse_script(text, "job.sh")
    assert parsed.overrides == {"cpus": 2}
    assert parsed.sbatch == ["#SBATCH --time=1:00"]


def test_empty_script() -> None:
    assert parse_script("", "job.sh") == ParsedScript(name=None, overrides={}, sbatch=[], directive_lines=[])


# ---------------------------------------------------------------- #SBATCH lines


def test_sbatch_lines_are_kept_verbatim_and_in_order() -> None:
    lines = [
        "#SBATCH --job-name=\"my job\" --comment='it''s \"odd\"'",
        "#SBATCH   --time=04:00:00   # four hours  ",
        "#SBATCH --wrap='unterminated",
        "#SBATCH",
    ]
    text = "#!/bin/bash\n" + "\n".join([lines[0], "#FRAY --cpus 2", *lines[1:]]) + "\nsrun python x.py\n"
    parsed = parse_script(text, "job.sh")
    assert parsed.sbatch == lines
    assert parsed.overrides == {"cpus": 2}


def test_sbatch_after_the_header_is_ignored_as_sbatch_does() -> None:
    text = "#!/bin/bash\n#SBATCH --time=1:00\necho\n#SBATCH --partition=late\n"
    assert parse_script(text, "job.sh").sbatch == ["#SBATCH --time=1:00"]


# ---------------------------------------------------------------- quoting and hostile values


def test_shlex_quoting() -> None:
    parsed = parse(
        """--env "MSG=hello world" --env MSG2='a "b" c' --env ESC=a\\ b --name 'it'"'"'s'""",
    )
    assert parsed.overrides["env"] == {"MSG": "hello world", "MSG2": 'a "b" c', "ESC": "a b"}
    assert parsed.name == "it's"


def test_hostile_values_are_kept_literally_never_interpreted() -> None:
    parsed = parse(
        "--name 'x; rm -rf / #'",
        """--env 'CMD=$(whoami); echo "pwned" `id` && exit 1' --env EMPTY= --env EQ=a=b""",
    )
    assert parsed.name == "x; rm -rf / #"
    assert parsed.overrides["env"] == {"CMD": '$(whoami); echo "pwned" `id` && exit 1', "EMPTY": "", "EQ": "a=b"}


def test_a_value_that_looks_like_an_option_needs_equals() -> None:
    assert parse("--env=A=--mode").overrides["env"] == {"A": "--mode"}
    # A run name never starts with '-': `--name=--mode` is a forgotten value, said so at submit.
    assert "a name cannot start with '-'" in error_of(script("--name=--mode")).problem
    assert "--name needs a value" in error_of(script("--name --mode indefinite")).problem


def test_unbalanced_quote() -> None:
    error = error_of(script("--name 'oops"))
    assert error.line_no == 2
    assert "no closing quotation" in error.problem.lower()
    assert "check the quotes" in error.problem


def test_newlines_cannot_reach_a_value() -> None:
    # A directive is one line, so an opened quote cannot run on into the next.
    text = script("--env 'A=one", body="#FRAY two'\necho\n")
    assert error_of(text).line_no == 2


# ---------------------------------------------------------------- option errors


def test_unknown_option_suggests_the_closest() -> None:
    error = error_of(script("--cpus 2", "--max-retry 5"))
    assert error.line_no == 3
    assert error.problem == "unknown option --max-retry; did you mean --max-retries?"


@pytest.mark.parametrize(("typo", "meant"), [("--memory", "--mem"), ("--gpu", "--gpus"), ("--keepalive", "--keep-alive")])
def test_more_typos(typo: str, meant: str) -> None:
    assert f"did you mean {meant}?" in error_of(script(f"{typo} 1")).problem


def test_unknown_option_without_a_close_match_lists_all() -> None:
    problem = error_of(script("--xyzzy")).problem
    assert problem.startswith("unknown option --xyzzy; valid options: --name, --mode,")
    assert "--clean-exit-ok" in problem


def test_sbatch_option_on_a_fray_line_points_to_sbatch() -> None:
    problem = error_of(script("--time 04:00:00")).problem
    assert "sbatch option" in problem and "#SBATCH --time=" in problem
    assert "did you mean" not in problem


def test_single_dash_and_bare_words() -> None:
    assert "did you mean --cpus?" in error_of(script("-cpus 2")).problem
    assert error_of(script("cpus 2")).problem == "expected an option like --cpus 8, got cpus; did you mean --cpus?"


def test_missing_value_at_end_of_line() -> None:
    problem = error_of(script("--cpus")).problem
    assert problem.startswith("--cpus needs a value: --cpus N (CPU cores to reserve")


def test_extra_word_after_a_value_suggests_quoting() -> None:
    problem = error_of(script("--name my run")).problem
    assert problem.startswith("unexpected run after --name my: each option takes one value")
    assert "--name 'my run'" in problem


def test_inline_comments_are_refused() -> None:
    assert "put a comment on a line of its own" in error_of(script("--cpus 2 # two cores")).problem


def test_duplicate_option_names_both_lines() -> None:
    error = error_of(script("--cpus 2", "--gpus 1", "--cpus=4"))
    assert error.line_no == 4
    assert error.problem == "--cpus is set on line 2 and again on line 4; keep one"


def test_duplicate_on_one_line() -> None:
    assert error_of(script("--name a --name b")).problem == "--name is set twice on line 2; keep one"


def test_env_is_repeatable_but_not_per_key() -> None:
    assert parse("--env A=1", "--env B=2").overrides["env"] == {"A": "1", "B": "2"}
    assert error_of(script("--env A=1", "--env A=2")).problem == "--env A is set on line 2 and again on line 3; keep one"


def test_directive_error_is_a_usage_error_with_exit_code_2() -> None:
    error = error_of(script("--cpus 2  --max-retry 5  "))
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert str(error) == "job.sh:2: unknown option --max-retry; did you mean --max-retries?\n    #FRAY --cpus 2  --max-retry 5"


# ---------------------------------------------------------------- CLI flags


def test_parse_flag_value() -> None:
    assert parse_flag_value("--mem", "4G") == ("mem_mb", 4096)
    assert parse_flag_value("--env", "A=b c") == ("env", {"A": "b c"})
    assert parse_flag_value("--clean-exit-ok", "false") == ("clean_exit_ok", False)
    assert parse_flag_value("--name", "x") == ("name", "x")


def test_parse_flag_value_errors_are_usage_errors() -> None:
    with pytest.raises(UsageError, match=r"did you mean --max-retries\?") as info:
        parse_flag_value("--max-retry", "3")
    assert not isinstance(info.value, DirectiveError)
    with pytest.raises(UsageError, match=r"^--mem 4X: expected a size like 4G"):
        parse_flag_value("--mem", "4X")
    with pytest.raises(UsageError, match="without control characters"):
        parse_flag_value("--name", "a\nb")
    with pytest.raises(UsageError, match="NUL"):
        parse_flag_value("--env", "A=a\0b")


# ---------------------------------------------------------------- building the spec


def test_defaults_when_nothing_is_set() -> None:
    spec = spec_of(parse())
    assert spec == RunSpec(args=["--lr", "3e-4"], workdir="/work")


def test_cli_overrides_directives() -> None:
    parsed = parse("--cpus 2 --gpus 1 --mode indefinite")
    spec = spec_of(parsed, cpus=16, mode="run_once")
    assert (spec.cpus, spec.gpus, spec.mode) == (16, 1, "run_once")


def test_env_merges_with_the_cli_winning_per_key() -> None:
    parsed = parse("--env A=script --env B=script")
    spec = spec_of(parsed, env={"B": "cli", "C": "cli"})
    assert spec.env == {"A": "script", "B": "cli", "C": "cli"}
    assert parsed.overrides["env"] == {"A": "script", "B": "script"}  # not mutated


def test_cli_can_fix_what_the_directives_got_wrong() -> None:
    spec = spec_of(parse("--keep-alive 3d"), mode="indefinite")
    assert spec.keep_alive_sec == 259200


@pytest.mark.parametrize(
    ("directives", "cli", "timeout", "grace"),
    [
        ((), {}, 120, 120),
        (("--heartbeat-interval 5s",), {}, 120, 120),
        (("--heartbeat-interval 1m",), {}, 360, 360),
        (("--heartbeat-interval 1m", "--heartbeat-timeout 2m"), {}, 120, 120),
        (("--heartbeat-interval 1m",), {"startup_grace_sec": 30.0}, 360, 30),
        (("--heartbeat-timeout 10m",), {}, 600, 600),
        ((), {"heartbeat_interval_sec": 100.0}, 600, 600),
    ],
)
def test_heartbeat_defaults(directives: tuple[str, ...], cli: dict, timeout: float, grace: float) -> None:
    spec = spec_of(parse(*directives), **cli)
    assert (spec.heartbeat_timeout_sec, spec.startup_grace_sec) == (timeout, grace)


@pytest.mark.parametrize(
    ("directives", "cli", "message"),
    [
        (("--heartbeat-interval 1m --heartbeat-timeout 30s",), {},
         "--heartbeat-timeout (30s) must be longer than --heartbeat-interval (1m)"),
        (("--heartbeat-timeout 10s",), {}, "try --heartbeat-timeout 1m"),
        (("--keep-alive 3d",), {}, "--keep-alive (3d) only applies with --mode indefinite (this run is run_once)"),
        (("--mode indefinite --keep-alive 3d",), {"mode": "run_once"}, "add --mode indefinite or drop --keep-alive"),
        (("--backoff-base 10m --backoff-max 1m",), {}, "--backoff-max (1m) must be at least --backoff-base (10m)"),
        (("--backend tpu",), {"gpus": 4}, "--gpus 4 cannot be met on --backend tpu"),
    ],
)
def test_cross_field_errors(directives: tuple[str, ...], cli: dict, message: str) -> None:
    with pytest.raises(UsageError, match="do not work together") as info:
        spec_of(parse(*directives), **cli)
    assert not isinstance(info.value, DirectiveError)
    assert message in str(info.value)


def test_all_cross_field_problems_are_reported_at_once() -> None:
    with pytest.raises(UsageError) as info:
        spec_of(parse("--keep-alive 1h --backoff-base 5m --backoff-max 1m"))
    assert "--keep-alive" in str(info.value) and "--backoff-max" in str(info.value)


def test_build_spec_refuses_fields_it_cannot_set() -> None:
    with pytest.raises(ValueError, match="name, sbatch"):
        spec_of(parse(), name="x", sbatch=["#SBATCH -p a"])
