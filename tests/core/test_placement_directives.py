"""`#FRAY --constraint/--tolerate/--replicas/--group-by/--priority`: parsed into the spec, refused with reasons."""

from __future__ import annotations

import pytest

from fray.core import directives
from fray.errors import DirectiveError, UsageError


TPU = "#FRAY --backend tpu --tpu v4-32 --zone us-west4-a --runtime-version tpu-ubuntu2204-base\n"


def spec_of(text: str, **cli: object):
    return directives.build_spec(directives.parse_script(text, "job.py"), dict(cli), workdir=".", args=[])


def test_placement_directives_reach_the_spec() -> None:
    spec = spec_of("#FRAY --constraint 'gpu-type=h100' --constraint \"zone in (a,b)\" --tolerate taint:spot\n"
                   "#FRAY --replicas 4 --priority batch\n")
    assert spec.constraints == ["gpu-type=h100", "zone in (a, b)"]  # as shown back: normalised
    assert spec.tolerations == ["spot"] and spec.replicas == 4 and spec.priority == "batch"
    grouped = spec_of("#FRAY --backend slurm --replicas 2 --group-by tpu-name\n")
    assert grouped.group_by == "tpu-name"


def test_a_cli_flag_adds_to_the_scripts_constraints() -> None:
    field, value = directives.parse_flag_value("--constraint", "memory-gb>=80")
    spec = spec_of("#FRAY --constraint gpu-type=h100\n", **{field: value})
    assert spec.constraints == ["gpu-type=h100", "memory-gb>=80"]


@pytest.mark.parametrize("text, problem", [
    ("#FRAY --constraint 'gpu-type>h100'\n", "'>' compares numbers"),
    ("#FRAY --priority urgent\n", "production, interactive, batch"),
    ("#FRAY --replicas 0\n", "--replicas"),
    ("#FRAY --group-by 'tpu name'\n", "not an attribute name"),
])
def test_bad_values_name_the_line(text: str, problem: str) -> None:
    with pytest.raises(DirectiveError, match="job.py:1") as caught:
        spec_of(text)
    assert problem in str(caught.value)


@pytest.mark.parametrize("text, problem", [
    ("#FRAY --group-by tpu-name\n", "add --replicas N"),
    ("#FRAY --replicas 2 --group-by tpu-name\n", "the local backend has one machine"),
    ("#FRAY --backend slurm --constraint memory-gb>=80\n", "sbatch can express feature:<name>"),
    (TPU + "#FRAY --replicas 3\n", "a v4-32 slice runs one task on each of its 4 hosts; use --replicas 4"),
    (TPU + "#FRAY --replicas 4 --group-by hostname\n", "grouped by tpu-name only"),
    (TPU + "#FRAY --constraint 'tpu-vm-count>=8'\n", "a v4-32 slice cannot take this run: no worker with tpu-vm-count>=8"),
])
def test_placements_that_cannot_work_are_refused_at_submit(text: str, problem: str) -> None:
    with pytest.raises(UsageError, match="do not work together") as caught:
        spec_of(text)
    assert problem in str(caught.value)


def test_a_tpu_run_grouped_by_tpu_name_puts_task_i_on_worker_i_of_its_slice() -> None:
    from fray.core.placement.tpu import place_on_slice

    spec = spec_of(TPU + "#FRAY --replicas 4 --group-by tpu-name --constraint tpu-type=v4-32 "
                         "--constraint 'tpu-vm-count>=4'\n")
    assert place_on_slice(spec) == (0, 1, 2, 3)
    assert place_on_slice(spec_of(TPU)) == (0, 1, 2, 3)  # one task per host without asking
    assert place_on_slice(spec_of(TPU.replace("v4-32", "v4-8"))) == (0,)
