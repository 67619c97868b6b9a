"""Slurm's nodes from sinfo as the scheduler's workers (fray.backends.slurm.node_workers): which runs no node could
ever take, and why."""

from __future__ import annotations

from fray.backends.slurm import node_workers, partitions
from fray.core.model import Applied, Counters, Meta, RunSpec
from fray.core.placement.runs import never_placeable


def meta(run_id: str, created_at: float, **spec: object) -> Meta:
    return Meta(run_id=run_id, name=run_id, created_at=created_at, submitted_by={"user": "ann", "host": "h"},
                script={}, spec=RunSpec(**spec), phase="queued", attempts=[], counters=Counters(),  # type: ignore[arg-type]
                applied=Applied())


SINFO = """\
n1|cpu*|up|idle|4|2000|gpu:a100:2(S:0)|(null)
n3|cpu*|up|idle|4|2000|gpu:h100:4|ib,nvme
n3|h100|up|idle|4|2000|gpu:h100:4|ib,nvme
n4|h100|up|mixed|4|2000|gpu:h100:4|ib,nvme
"""


def test_slurm_nodes_from_sinfo_say_which_runs_no_node_could_ever_take() -> None:
    nodes = node_workers.workers(partitions.parse_sinfo(SINFO))
    assert nodes[1].attributes["feature:nvme"] == 1 and nodes[1].attributes["partition"] == "cpu"
    runs = [meta("ib", 0.0, constraints=["feature:ib"], gpus=4), meta("ssd", 0.0, constraints=["feature:ssd"]),
            meta("wide", 0.0, replicas=3, constraints=["feature:ib"]), meta("a100", 0.0, partitions=["h100"],
                                                                              constraints=["gpu-type=a100"]),
            meta("late", 0.0, cpus=8, scheduling_timeout_sec=60.0)]
    never = never_placeable(runs, nodes, now=30.0)
    assert "ib" not in never
    assert never["ssd"].reason == "no worker with feature:ssd" and not never["ssd"].timed_out
    # Three tasks need three machines; n3 is listed twice (two partitions) but is one.
    assert never["wide"].reason == "only 2 workers with feature:ib have 1 CPU in all; 3 are needed"
    assert never["a100"].reason == "no worker with gpu-type=a100 and partition in (h100) together"
    assert never["late"].reason == "no worker has 8 CPUs in all (4 match)" and not never["late"].timed_out
    assert never_placeable(runs, nodes, now=61.0)["late"].timed_out
    assert never_placeable(runs, nodes, now=61.0)["late"].reason == \
        "not placed within 1m: no worker has 8 CPUs in all (4 match)"
