"""The `#FRAY` option table: every option's flag, RunSpec field, help text and value parser.

`fray.core.directives` reads scripts with it; the CLI and TUI build their flags and
help from it, so a directive and its command-line flag can never differ. Pure.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from fray.core import dependencies, job_output, values
from fray.core.backend_names import BACKEND_NAMES
from fray.core.model import Mode, RunSpec
from fray.core.placement import values as placement_values
from fray.core.values import format_duration, parse_memory_mb
from fray.wrapper import contract

_DEFAULT = RunSpec()
# Missed beats tolerated before a run counts as stalled when the user sets only the
# interval: enough to ride out a slow step or shared-filesystem lag, few enough
# that a hang is noticed within minutes.
BEATS_PER_TIMEOUT = 6


class DirectiveOption(NamedTuple):
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
    dash_value: bool = False  # its value may start with "-" (arguments for the script: --retry-args --resume)


# Settled at submit (fray.state.run_code) into the spec's code, python, python_env and workdir: relative
# paths are taken from the script's folder on a #FRAY line, from the current folder on the command line.
SUBMIT_SETTLED = ("code", "workdir", "python", "venv", "conda")

OPTIONS: tuple[DirectiveOption, ...] = (
    DirectiveOption("--name", "name", "NAME", "a name for the run, shown by fray list", values.parse_name),
    DirectiveOption(
        "--mode", "mode", "MODE",
        f"run_once: retry until it succeeds; indefinite: keep it running (default {_DEFAULT.mode})",
        values.choice(tuple(m.value for m in Mode)),
    ),
    DirectiveOption(
        "--max-retries", "max_retries", "N",
        f"workload failures (exit 50) allowed before the run fails (default {_DEFAULT.max_retries})",
        values.count(minimum=0, example="3"),
    ),
    DirectiveOption(
        "--max-retries-preemption", "max_retries_preemption", "N",
        "node-side failures allowed: probe, node fault, lost heartbeat, preemption"
        f" (default {_DEFAULT.max_retries_preemption})",
        values.count(minimum=0, example="100"),
    ),
    DirectiveOption(
        "--keep-alive", "keep_alive_sec", "DURATION",
        "with --mode indefinite: how long to keep the run going, like 3d (default: until stopped)",
        values.duration(positive=True),
    ),
    DirectiveOption(
        "--heartbeat-interval", "heartbeat_interval_sec", "DURATION",
        f"how often the wrapper writes a heartbeat (default {format_duration(_DEFAULT.heartbeat_interval_sec)})",
        values.duration(positive=True),
    ),
    DirectiveOption(
        "--heartbeat-timeout", "heartbeat_timeout_sec", "DURATION",
        f"restart after this long without a heartbeat (default {format_duration(_DEFAULT.heartbeat_timeout_sec)},"
        f" or {BEATS_PER_TIMEOUT} x a longer interval)",
        values.duration(positive=True),
    ),
    DirectiveOption(
        "--startup-grace", "startup_grace_sec", "DURATION",
        "time allowed before the first heartbeat (default: the heartbeat timeout)",
        values.duration(positive=False),
    ),
    DirectiveOption(
        "--stop-grace", "stop_grace_sec", "DURATION",
        f"time between asking the workload to stop and killing it (default {format_duration(_DEFAULT.stop_grace_sec)})",
        values.duration(positive=False),
    ),
    DirectiveOption(
        "--backoff-base", "backoff_base_sec", "DURATION",
        "first delay before restarting a crash loop, doubling after"
        f" (default {format_duration(_DEFAULT.backoff_base_sec)})",
        values.duration(positive=False),
    ),
    DirectiveOption(
        "--backoff-max", "backoff_max_sec", "DURATION",
        f"longest delay between restarts (default {format_duration(_DEFAULT.backoff_max_sec)})",
        values.duration(positive=False),
    ),
    DirectiveOption(
        "--cpus", "cpus", "N",
        f"CPU cores to reserve (default {_DEFAULT.cpus}; 0 for a driver that only waits on the jobs it launches)",
        values.count(minimum=0, example="8")
    ),
    DirectiveOption(
        "--mem", "mem_mb", "SIZE", "memory to reserve, like 32G (default: the backend's)", parse_memory_mb
    ),
    DirectiveOption(
        "--gpus", "gpus", "N", f"GPUs to reserve (default {_DEFAULT.gpus})", values.count(minimum=0, example="2")
    ),
    DirectiveOption(
        "--partitions", "partitions", "P1,P2",
        "Slurm partitions to try, in this order (default: those whose GPUs fit, by --prefer)", values.parse_partitions,
    ),
    DirectiveOption(
        "--min-vram", "min_vram_gb", "GB", "with --gpus: the least memory each GPU must have, like 40", values.parse_vram
    ),
    DirectiveOption(
        "--max-vram", "max_vram_gb", "GB", "with --gpus: the most memory each GPU may have, like 48", values.parse_vram
    ),
    DirectiveOption(
        "--prefer", "prefer", "min|max",
        f"try the partitions with the least (min) or the most (max) GPU memory first (default {_DEFAULT.prefer})",
        values.choice(("min", "max")),
    ),
    DirectiveOption(
        "--partition-fallback", "partition_fallback", "N[,DURATION]",
        "use the next partition after N node-side failures in a row on one; retry the preferred after DURATION"
        f" (default {_DEFAULT.partition_fallback['after_failures']},"
        f"{format_duration(_DEFAULT.partition_fallback['retry_preferred_sec'])})",
        values.parse_fallback,
    ),
    DirectiveOption(
        "--backend", "backend", "BACKEND",
        f"where attempts run: {', '.join(BACKEND_NAMES)} (default {_DEFAULT.backend})",
        values.choice(BACKEND_NAMES),
    ),
    DirectiveOption(
        "--tpu", "tpu", "TYPE", "TPU accelerator type for backend tpu, like v5litepod-16 or v4-32", values.parse_tpu_type,
    ),
    DirectiveOption(
        "--zone", "zones", "Z1,Z2", "zones to create the TPU slice in, in this order (quota or capacity: the next)",
        values.parse_zones,
    ),
    DirectiveOption(
        "--runtime-version", "runtime_version", "VERSION", "TPU VM software version, like tpu-ubuntu2204-base",
        values.parse_zone_word,
    ),
    DirectiveOption("--spot", "spot", "", "Spot TPU slice", values.parse_bool, is_flag=True),
    DirectiveOption("--preemptible", "preemptible", "", "preemptible TPU slice", values.parse_bool, is_flag=True),
    DirectiveOption("--reserved", "reserved", "", "TPU slice from a reservation", values.parse_bool, is_flag=True),
    DirectiveOption(
        "--queued", "queued", "", "create the TPU slice through a queued resource", values.parse_bool, is_flag=True,
    ),
    DirectiveOption(
        "--code", "code", "DIR|none",
        "the project to snapshot and run from (default: the git work tree holding the script, else its folder); "
        "none: run the script where it is",
        values.parse_text("a folder, or none"),
    ),
    DirectiveOption(
        "--workdir", "workdir", "DIR",
        "the job's working directory (default: where you submitted from, inside the snapshot)",
        values.parse_text("a folder"),
    ),
    DirectiveOption(
        "--python", "python", "PATH",
        "the interpreter of a Python script (default: its #! line, else the python3 on your PATH)",
        values.parse_text("an interpreter, like /usr/bin/python3.11"),
    ),
    DirectiveOption(
        "--venv", "venv", "DIR", "run under this virtual environment's python, its bin/ first on PATH",
        values.parse_text("a virtual environment's folder"),
    ),
    DirectiveOption(
        "--conda", "conda", "NAME", "run under this conda env's python (a name, or its folder)",
        values.parse_text("a conda env's name or folder"),
    ),
    DirectiveOption(
        "--env", "env", "KEY=VALUE", "set a variable in the workload's environment (repeatable)",
        values.parse_env, repeatable=True,
    ),
    DirectiveOption(
        "--progress-timeout", "progress_timeout_sec", "DURATION",
        "a hang: the step a workload reports (report.progress) has not advanced for this long; "
        f"checked from its first report on (default {format_duration(_DEFAULT.progress_timeout_sec or 0)}; off disables)",
        values.duration_or_off,
    ),
    DirectiveOption(
        "--progress-pattern", "progress_patterns", "REGEX",
        "progress from what the job prints: a regular expression searched in each line of its stdout and stderr, "
        "with named groups step, loss, samples_per_sec and any other metric, like "
        "'iter (?P<step>\\d+): loss (?P<loss>[0-9.]+)' (repeatable: each line may match any of them)",
        job_output.parse_progress_pattern, repeatable=True,
    ),
    DirectiveOption(
        "--progress-tensorboard", "progress_tensorboard", "DIR",
        "progress from the scalars of the TensorBoard event files the job writes under DIR (relative to its "
        "working directory): the step, a scalar named loss, and every other scalar as a metric",
        job_output.parse_folder,
    ),
    DirectiveOption(
        "--retry-args", "retry_args", "ARGS",
        "arguments added to the script's command line in every attempt after the first, like "
        "'--init_from=resume' (how the job resumes from its own checkpoint)",
        job_output.parse_retry_args, dash_value=True,
    ),
    DirectiveOption(
        "--retry-args-if-exists", "retry_args_if_exists", "PATH",
        "with --retry-args: add them only when this file exists (relative to the job's working directory), "
        "like out/ckpt.pt",
        job_output.parse_relative_path,
    ),
    DirectiveOption(
        "--idle-timeout", "idle_timeout_sec", "DURATION",
        "a hang: the workload's processes use no CPU and report no progress for this long; the wrapper takes "
        f"their stacks and restarts it (default {format_duration(_DEFAULT.idle_timeout_sec or 0)}; 0 or off disables)",
        values.duration_or_off,
    ),
    DirectiveOption(
        "--restart-on-progress-stall", "restart_on_progress_stall", "",
        "restart the run when its step stops advancing (default true); false only shows it as degraded",
        values.parse_bool, is_flag=True,
    ),
    DirectiveOption(
        "--retry-window", "retry_window_sec", "DURATION",
        "failures count against --max-retries and --max-retries-preemption only while this recent "
        f"(default {format_duration(_DEFAULT.retry_window_sec or 0)}; off: every failure counts)",
        values.duration_or_off,
    ),
    DirectiveOption(
        "--clean-exit-ok", "clean_exit_ok", "",
        "treat exit code 0 as success, even in indefinite mode before keep-alive ends",
        values.parse_bool, is_flag=True,
    ),
    DirectiveOption(
        "--probes", "probes", "LIST",
        f"run exactly these preflight probes ({','.join(contract.PROBE_NAMES)}, or none)"
        " (default: node, plus gpu,mig,trespassers,cuda with --gpus)",
        values.parse_probes,
    ),
    DirectiveOption(
        "--skip-probes", "skip_probes", "LIST", "never run these preflight probes, like trespassers", values.parse_probes,
    ),
    DirectiveOption(
        "--probe-timeout", "probe_timeout_sec", "DURATION",
        f"each preflight probe's deadline; a hung probe is a node fault"
        f" (default {format_duration(_DEFAULT.probe_timeout_sec)})",
        values.duration(positive=True),
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
        values.parse_health_cmd,
    ),
    DirectiveOption(
        "--health-interval", "health_interval_sec", "DURATION",
        f"time between health checks, and each check's deadline"
        f" (default {format_duration(_DEFAULT.health_interval_sec)})",
        values.duration(positive=True),
    ),
    DirectiveOption(
        "--health-retries", "health_retries", "N",
        f"health checks failed in a row that count as a stall (default {_DEFAULT.health_retries})",
        values.count(minimum=1, example="3"),
    ),
    DirectiveOption(
        "--constraint", "constraints", "EXPR",
        "run only on workers whose attributes match: gpu-type=h100, memory-gb>=80, 'zone in (a, b)', "
        "feature:ib, !taint:spot (repeatable; all must hold)",
        placement_values.parse_constraint, repeatable=True,
    ),
    DirectiveOption(
        "--tolerate", "tolerations", "TAINT",
        "may run on workers tainted taint:TAINT, which other runs avoid (repeatable)",
        placement_values.parse_toleration, repeatable=True,
    ),
    DirectiveOption(
        "--replicas", "replicas", "N",
        "tasks of the run, each with FRAY_TASK_INDEX and FRAY_NUM_TASKS; they live and die together: one failing "
        "stops the others and all are retried under --max-retries; once task 0 succeeded the others get up to "
        f"--stop-grace to finish (default {_DEFAULT.replicas})",
        values.count(minimum=1, example="4"),
    ),
    DirectiveOption(
        "--group-by", "group_by", "ATTRIBUTE",
        "place every task on workers sharing this attribute (like tpu-name), task i on the i-th, or none",
        placement_values.parse_attribute_name,
    ),
    DirectiveOption(
        "--priority", "priority", "BAND",
        f"production, interactive or batch: which waiting runs start first (default {_DEFAULT.priority})",
        values.choice(("production", "interactive", "batch")),
    ),
    DirectiveOption(
        "--scheduling-timeout", "scheduling_timeout_sec", "DURATION",
        "end the run as unschedulable (failed, with the reason) when it has not been placed this long "
        "after it could start: held by fray's placement, or pending in Slurm's or the cloud's queue "
        "(default off)",
        values.duration_or_off,
    ),
    DirectiveOption(
        "--after", "after", "RUN[:ok|:fail|:any]",
        "start only once RUN (a run name, id or sweep group) has succeeded (ok, the default), failed (fail) or "
        "ended (any), whatever attempts it took; if it cannot, this run ends failed_dependency (repeatable). "
        "The job sees FRAY_AFTER_<NAME> (its folder) and FRAY_AFTER_<NAME>_CHECKPOINT",
        dependencies.parse_after, repeatable=True,
    ),
)
