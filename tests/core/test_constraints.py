"""Constraint strings and worker attributes: parsing, matching, type errors, taints (pure)."""

from __future__ import annotations

import pytest

from fray.core.placement import ConstraintSyntaxError, ConstraintTypeError, Op, parse
from fray.core.placement.attributes import local_attributes, slurm_node_attributes, tpu_host_attributes
from fray.core.placement.priority import Band, Credits, effective_band, parse_band, usage_hours
from fray.errors import UsageError


@pytest.mark.parametrize("text, key, op, value", [
    ("gpu-type=h100", "gpu-type", Op.EQ, "h100"),
    ("gpu-type == h100", "gpu-type", Op.EQ, "h100"),
    ("memory-gb>=80", "memory-gb", Op.GE, 80),
    ("memory-gb > 79.5", "memory-gb", Op.GT, 79.5),
    ("cpu-count<8", "cpu-count", Op.LT, 8),
    ("cpu-count<=8", "cpu-count", Op.LE, 8),
    ("zone!=us-east1", "zone", Op.NE, "us-east1"),
    ("zone in (a, b,c)", "zone", Op.IN, ("a", "b", "c")),
    ("taint:spot", "taint:spot", Op.EXISTS, None),
    ("!taint:spot", "taint:spot", Op.NOT_EXISTS, None),
    ('rack="12"', "rack", Op.EQ, "12"),
])
def test_parse_every_operator(text: str, key: str, op: Op, value: object) -> None:
    constraint = parse(text)
    assert (constraint.key, constraint.op, constraint.value) == (key, op, value)
    assert parse(str(constraint)) == constraint  # what we show parses back to the same thing


@pytest.mark.parametrize("text, problem", [
    ("", "empty"),
    ("=h100", "must start with an attribute name"),
    ("gpu-type ~ h100", "expected an operator"),
    ("memory-gb>=", "needs a value"),
    ("gpu-type>h100", "compares numbers"),
    ("zone in (a, b", "closing ')'"),
    ("zone in (a,,b)", "takes a list"),
    ("!gpu-type=h100", "takes no value"),
])
def test_parse_errors_say_what_where_and_how(text: str, problem: str) -> None:
    with pytest.raises(ConstraintSyntaxError) as caught:
        parse(text)
    message = str(caught.value)
    assert problem in message and repr(text) in message
    assert "write it as key=value" in message  # how to fix it
    assert isinstance(caught.value, UsageError)  # the CLI prints it and exits 2


def test_matching_and_missing_attributes() -> None:
    worker = {"gpu-type": "h100", "memory-gb": 80, "zone": "b"}
    assert parse("gpu-type=h100").matches(worker)
    assert not parse("gpu-type!=h100").matches(worker)
    assert parse("memory-gb>=80").matches(worker) and not parse("memory-gb>80").matches(worker)
    assert parse("memory-gb>79.5").matches(worker)  # int and float compare as numbers
    assert parse("zone in (a, b)").matches(worker)
    assert not parse("tpu-name=x").matches(worker) and not parse("tpu-name!=x").matches(worker)
    assert parse("!taint:spot").matches(worker) and not parse("taint:spot").matches(worker)


def test_comparing_different_types_is_a_clear_error() -> None:
    with pytest.raises(ConstraintTypeError) as caught:
        parse("memory-gb>=80").matches({"memory-gb": "eighty"}, "node7")
    message = str(caught.value)
    assert "memory-gb>=80" in message and "node7" in message and "'eighty'" in message
    with pytest.raises(ConstraintTypeError, match='rack="12"'):
        parse("rack=12").matches({"rack": "12"}, "node7")  # tells how to quote it


def test_attributes_from_each_backend() -> None:
    local = local_attributes("vm1", 16, 65536, 2, "NVIDIA H100 80GB HBM3")
    assert local == {"hostname": "vm1", "cpu-count": 16, "memory-gb": 64, "gpu-count": 2, "gpu-type": "h100"}
    node = slurm_node_attributes("n1", "gpu", 64, 512000, "gpu:a100:4(S:0-1)", ["ib", "nvme"])
    assert node["gpu-type"] == "a100" and node["gpu-count"] == 4 and node["partition"] == "gpu"
    assert node["feature:ib"] == 1 and node["memory-gb"] == 500
    host = tpu_host_attributes("slice-a", 3, "4x4", 4, "v5p-32")
    assert host["tpu-name"] == "slice-a" and host["tpu-worker-id"] == 3 and host["tpu-vm-count"] == 4


def test_bands_and_credits() -> None:
    assert parse_band("Production") is Band.PRODUCTION
    with pytest.raises(UsageError, match="production, interactive, batch"):
        parse_band("urgent")
    credits = Credits(budget=10.0, usage={"ann": usage_hours(cpus=2, gpus=1, seconds=3600)})  # 10 hours used
    assert credits.remaining("ann") == 0 and credits.remaining("bob") == 10
    assert effective_band(Band.PRODUCTION, credits.remaining("ann")) is Band.BATCH
    assert effective_band(Band.PRODUCTION, credits.remaining("bob")) is Band.PRODUCTION
    assert Credits().remaining("ann") == float("inf")  # no budget: credits are off


@pytest.mark.parametrize("name, model", [("NVIDIA H100 80GB HBM3", "h100"), ("Tesla V100-SXM2-16GB", "v100"),
                                         ("NVIDIA A100-SXM4-80GB", "a100"), ("h100", "h100"), ("l4", "l4")])
def test_gpu_models_as_people_write_them(name: str, model: str) -> None:
    from fray.core.placement.attributes import normalise_gpu_type

    assert normalise_gpu_type(name) == model
