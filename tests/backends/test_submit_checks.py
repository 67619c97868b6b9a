"""Mistakes are refused at submit (exit 2, every problem with its fix, nothing written), never a crash loop.

The pure judge (fray.core.submit_checks) is tested with values; `fray submit`
as a user runs it, on this machine and on the real Slurm test cluster.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fray.backends import offers, wrapper_command
from fray.backends.protocol import AttemptKey, SubmitRequest
from fray.core import directives, submit_checks
from fray.core.model import RunSpec
from fray.core.capacity import Capacity
from fray.core.tpu_topology import default_runtime
from fray.state import store
from fray.state.layout import Home
from fray.wrapper import options as wrapper_options
from tests.conftest import run_fray, schema_validate

MACHINE = submit_checks.Offer(capacity=Capacity(cpus=2, mem_mb=4000, gpus=0))
CLUSTER = submit_checks.Offer(partitions=(
    submit_checks.PartitionOffer("cpu", "up", {}),
    submit_checks.PartitionOffer("a100", "up", {"a100": 2}),
    submit_checks.PartitionOffer("old", "inact", {}),
))


def nothing_written(home: Home) -> bool:
    return not home.runs_dir.exists() or not any(home.runs_dir.iterdir())


# ---------------------------------------------------------------- the pure judge


def test_a_request_larger_than_this_machine_is_a_problem_with_its_fix() -> None:
    found = submit_checks.problems(RunSpec(cpus=1, replicas=3), "r", MACHINE)
    assert found == ["it asks for 3 CPUs (3 replicas) and this machine has 2: lower --cpus/--replicas, "
                     "or use --backend slurm"]
    assert submit_checks.problems(RunSpec(gpus=1, mem_mb=8000), "r", MACHINE) == [
        "it asks for 8000 MB of memory and this machine has 4000 MB: lower --mem, or use --backend slurm",
        "it asks for 1 GPUs and this machine has 0: lower --gpus, or use --backend slurm"]
    assert submit_checks.problems(RunSpec(cpus=2), "r", MACHINE) == []
    assert submit_checks.problems(RunSpec(cpus=64), "r", submit_checks.Offer()) == []  # not known: not judged


def test_slurm_partitions_and_gpu_types_that_do_not_exist_are_problems() -> None:
    spec = RunSpec(backend="slurm", partitions=["gpu", "a100"])
    assert submit_checks.problems(spec, "r", CLUSTER) == [
        "Slurm has no partition 'gpu' (it has: a100, cpu, old); name one of those (`fray partitions` lists "
        "them with their GPUs)"]
    asked = submit_checks.Asked(partitions=("old",), gpu_types=("h100",))
    found = submit_checks.problems(RunSpec(backend="slurm"), "r", CLUSTER, asked)
    assert found[0].startswith("Slurm partition 'old' is inact")
    assert found[1] == "no Slurm node has GPUs of type 'h100' (the cluster has: a100); fix the #SBATCH --gres line"
    assert submit_checks.problems(spec, "r", submit_checks.Offer()) == []  # sinfo failed: sbatch judges


def test_sbatch_lines_are_read_for_partitions_and_gres() -> None:
    spec = RunSpec(backend="slurm", sbatch=["#SBATCH -p cpu,old", "#SBATCH --gres=gpu:h100:2", "#SBATCH -t 1-2"])
    assert offers.asked(spec) == submit_checks.Asked(partitions=("cpu", "old"), gpu_types=("h100",),
                                                     options=frozenset({"partition", "gres", "time"}),
                                                     time_sec=26 * 3600.0)
    assert offers.asked(RunSpec(backend="slurm", sbatch=["#SBATCH --gres=gpu:2"])).gpu_types == ()


def test_tpu_needs_a_type_and_a_zone_and_gets_its_generations_runtime() -> None:
    found = submit_checks.problems(RunSpec(backend="tpu"), "r", submit_checks.Offer())
    assert [p.split(":")[0] for p in found] == ["--backend tpu needs the accelerator type",
                                                "--backend tpu needs a zone"]
    bad = submit_checks.problems(RunSpec(backend="tpu", tpu="v4-7", zones=["uswest4"], runtime_version="x"), "r",
                                 submit_checks.Offer())
    assert "v4-7" in bad[0] and "not a whole number of chips" in bad[0]
    assert bad[1] == "--zone uswest4: not a Google Cloud zone (region and letter, like us-west4-a)"
    assert default_runtime("v5litepod-16") == "v2-alpha-tpuv5-lite"
    assert default_runtime("v4-32") == "tpu-ubuntu2204-base"
    parsed = directives.parse_script("#FRAY --backend tpu --tpu v6e-8 --zone us-east5-b\n", "t.py")
    spec = directives.build_spec(parsed, {}, workdir="/w", args=[])
    assert spec.runtime_version == "v2-alpha-tpuv6e"
    assert submit_checks.problems(spec, "r", submit_checks.Offer()) == []
    chosen = directives.build_spec(parsed, {"runtime_version": "mine"}, workdir="/w", args=[])
    assert chosen.runtime_version == "mine"


def test_the_interpreter_of_a_scripts_first_line() -> None:
    assert submit_checks.interpreter_of(b"#!/usr/bin/env -S python3 -u\nx") == "python3"
    assert submit_checks.interpreter_of(b"#! /bin/bash -e\n") == "/bin/bash"
    assert submit_checks.interpreter_of(b"print(1)\n") is None
    missing = submit_checks.Offer(capacity=Capacity(2, None, 0), missing_interpreter="python9")
    assert "asks for python9, which this machine does not have" in submit_checks.problems(RunSpec(), "r", missing)[0]


def test_a_run_name_may_not_look_like_an_option() -> None:
    assert submit_checks.problems(RunSpec(), "--help", submit_checks.Offer())[0].startswith(
        "run name '--help': a name cannot start with '-'")
    assert submit_checks.problems(RunSpec(), "it's; fine", submit_checks.Offer()) == []


def test_the_wrapper_reads_any_name_as_a_name(tmp_path: Path) -> None:
    # Even a name that slipped past the checks reaches the wrapper as a value, never as its option.
    request = SubmitRequest(key=AttemptKey("20261126-000000-x-abcd", 1), name="--help", spec=RunSpec(),
                            home=tmp_path, script=tmp_path / "s.py", attempt_dir=tmp_path / "a",
                            checkpoint_dir=tmp_path / "c")
    argv = wrapper_command.wrapper_argv("python", request)
    parsed = wrapper_options.parse(argv[argv.index("run"):])
    assert parsed.job_name == "--help"


# ---------------------------------------------------------------- fray submit


def test_submit_refuses_a_name_that_is_an_option_and_writes_nothing(home: Home, tmp_path: Path) -> None:
    script = tmp_path / "x.py"
    script.write_text("print('hi')\n")
    proc = run_fray("submit", str(script), "--name", "--help")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "a name cannot start with '-'" in proc.stderr
    assert nothing_written(home)


def test_submit_refuses_more_replicas_than_cpus_with_the_fix_and_json(home: Home, tmp_path: Path) -> None:
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2, "gpus": 0}}))
    script = tmp_path / "r.py"
    script.write_text("print('hi')\n")
    proc = run_fray("submit", str(script), "--replicas", "3")
    assert proc.returncode == 2
    assert "can never start on the local backend, so nothing was submitted" in proc.stderr
    assert "it asks for 3 CPUs (3 replicas) and this machine has 2" in proc.stderr
    proc = run_fray("submit", str(script), "--sweep", "lr=1,2", "--gpus", "1", "--json")
    assert proc.returncode == 2
    document = json.loads(proc.stdout)
    schema_validate("cli-error", document)
    assert "1 GPUs and this machine has 0" in json.dumps(document)
    assert nothing_written(home)


def test_submit_refuses_a_script_whose_interpreter_this_machine_lacks(home: Home, tmp_path: Path) -> None:
    script = tmp_path / "x.py"
    script.write_text("#!/usr/bin/env python9.99\nprint('hi')\n")
    proc = run_fray("submit", str(script))
    assert proc.returncode == 2 and "asks for python9.99, which this machine does not have" in proc.stderr
    assert nothing_written(home)


def test_submit_to_tpu_without_a_zone_is_refused(home: Home, tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("print('hi')\n")
    proc = run_fray("submit", str(script), "--backend", "tpu", "--tpu", "v5litepod-16")
    assert proc.returncode == 2 and "needs a zone: add --zone Z" in proc.stderr
    assert nothing_written(home)


def test_submit_to_slurm_refuses_a_partition_and_a_gpu_type_the_cluster_lacks(slurm_cluster, home: Home,
                                                                            tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/bash\n#SBATCH --gres=gpu:v100:1\n#FRAY --backend slurm\necho hi\n")
    proc = run_fray("submit", str(script), "--partitions", "gpu-big")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Slurm has no partition 'gpu-big' (it has: a100, cpu, h100)" in proc.stderr
    assert "no Slurm node has GPUs of type 'v100' (the cluster has: a100, h100)" in proc.stderr
    assert nothing_written(home)


def test_fray_submit_and_map_refuse_a_function_this_machine_can_never_run(home: Home) -> None:
    import fray
    from fray.cluster.api import ClusterError

    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2, "gpus": 0}}))
    with pytest.raises(ClusterError, match="(?s)can never start on the local backend.*1 GPUs and this machine has 0"):
        fray.submit(abs, -1, resources={"gpus": 1})
    with pytest.raises(ClusterError, match="(?s)it asks for 4 CPUs and this machine has 2"):
        fray.map(abs, [1, 2], resources={"cpus": 4})
    assert nothing_written(home) and not home.daemon_lease.exists()
    assert not home.daemon_log.exists()  # no daemon was started for a map that writes nothing (its log: at once)
