"""`#FRAY --constraint/--tolerate/--replicas/--group-by/--priority`: parsed into the spec, refused with reasons."""

from __future__ import annotations

import pytest

from fray.core import directives
from fray.errors import DirectiveError, UsageError


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
])
def test_placements_that_cannot_work_are_refused_at_submit(text: str, problem: str) -> None:
    with pytest.raises(UsageError, match="do not work together") as caught:
        spec_of(text)
    assert problem in str(caught.value)
