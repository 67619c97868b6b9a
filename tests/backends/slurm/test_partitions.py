"""GRES parsing, the GPU memory table, partition choice and partition fallback (pure)."""

from __future__ import annotations

import pytest

from fray.core import partition_policy

from fray.backends.slurm import partitions
from fray.core.model import Attempt
from fray.core.partition_policy import Candidates
from fray.backends.slurm.partitions import Gpu, Need

# `sinfo --noheader --Node --format=%N|%P|%a|%T|%c|%m|%G` as the test cluster prints it, plus a
# mixed node, an untyped GRES, sockets, a down partition and a GPU nobody knows.
SINFO = """\
n1|a100|up|idle|4|2000|gpu:a100:2
n1|cpu*|up|idle|4|2000|gpu:a100:2
n2|a100|up|mixed|4|2000|gpu:a100:2(S:0-1)
n2|cpu*|up|mixed|4|2000|gpu:a100:2(S:0-1)
n3|h100|up|idle|4|2000|gpu:h100:4
n3|cpu*|up|idle|4|2000|gpu:h100:4
n4|h100|up|down*|4|2000|gpu:h100:4
n4|cpu*|up|down*|4|2000|gpu:h100:4
m1|mixed|up|idle|64|512000+|gpu:a100_80g:4(S:0),gpu:v100:2(S:1),mps:400
u1|untyped|up|idle|8|(null)|gpu:2
x1|mystery|up|idle|8|1000|gpu:zz9000:8
d1|old|down|idle|8|1000|gpu:v100:8
"""


@pytest.mark.parametrize(("text", "gpus"), [
    ("gpu:a100:4", (Gpu("a100", 4),)),
    ("gpu:a100:4(S:0-1)", (Gpu("a100", 4),)),
    ("gpu:a100:2(S:0,1),gpu:v100:1(S:1)", (Gpu("a100", 2), Gpu("v100", 1))),
    ("gpu:2", (Gpu(None, 2),)),
    ("gpu", (Gpu(None, 1),)),
    ("gpu:tesla_t4:1,mps:100,shard:8", (Gpu("tesla_t4", 1),)),
    ("(null)", ()),
    ("", ()),
])
def test_parse_gres(text: str, gpus: tuple[Gpu, ...]) -> None:
    assert partitions.parse_gres(text) == gpus


@pytest.mark.parametrize(("name", "gb"), [
    ("v100", 16), ("v100s", 32), ("v100-32gb", 32), ("tesla_v100-sxm2-16gb", 16),
    ("a100", 40), ("a100-80gb", 80), ("a100_80g", 80), ("nvidia_a100-sxm4-80gb", 80), ("NVIDIA A100 80GB PCIe", 80),
    ("h100", 80), ("h100_nvl", 94), ("h200", 141), ("gh200", 96), ("l40", 48), ("l40s", 48), ("l4", 24),
    ("a10", 24), ("a10g", 24), ("t4", 16), ("tesla_t4", 16), ("a40", 48), ("a30", 24), ("rtx_a6000", 48),
    ("rtx8000", 48), ("rtx6000", 24), ("rtx_4090", 24), ("2080ti", 11), ("p100", 16), ("mi250x", 128), ("b200", 180),
])
def test_vram_table_and_aliases(name: str, gb: float) -> None:
    assert partitions.vram_gb(name) == gb


@pytest.mark.parametrize("name", ["zz9000", "gpu", "a1000x", ""])
def test_unknown_gpus_have_no_memory(name: str) -> None:
    assert partitions.vram_gb(name) is None


def summary() -> list[partitions.Partition]:
    return partitions.summarize(partitions.parse_sinfo(SINFO))


def test_sinfo_rows_summarize_into_partitions() -> None:
    by_name = {p.name: p for p in summary()}
    assert list(by_name) == ["a100", "cpu", "h100", "mixed", "untyped", "mystery", "old"]
    cpu = by_name["cpu"]
    assert cpu.default and cpu.nodes == ("n1", "n2", "n3", "n4")
    assert cpu.states == {"idle": 2, "mixed": 1, "down*": 1}
    assert cpu.gpus == {"a100": 2, "h100": 4}
    assert by_name["mixed"].gpus == {"a100_80g": 4, "v100": 2}
    assert by_name["untyped"].gpus == {None: 2}
    assert by_name["old"].available == "down"
    assert by_name["a100"].to_dict()["gpus"] == [{"type": "a100", "per_node": 2, "nodes": 2, "vram_gb": 40.0}]


def test_nodes_across_partitions() -> None:
    nodes = {n.name: n for n in partitions.nodes(partitions.parse_sinfo(SINFO))}
    assert nodes["n1"].partitions == ("a100", "cpu")
    assert nodes["m1"].mem_mb == 512000 and nodes["m1"].gpus == (Gpu("a100_80g", 4), Gpu("v100", 2))
    assert nodes["u1"].mem_mb is None


def chain(need: Need) -> tuple[str, ...]:
    found = partitions.choose(summary(), need)
    assert found is not None
    return found.chain


def test_no_gpus_and_no_names_leaves_the_choice_to_slurm() -> None:
    assert partitions.choose(summary(), Need()) is None


def test_prefer_min_tries_the_smallest_memory_first_and_pure_gpu_partitions_before_mixed_ones() -> None:
    # v100 (16) in mixed; a100 (40) on all of a100 but half of cpu; h100 (80); unknown memory last; "old" is down.
    assert chain(Need(gpus=2)) == ("mixed", "a100", "cpu", "h100", "untyped", "mystery")


def test_prefer_max_tries_the_largest_first() -> None:
    # h100 and mixed's a100_80g tie at 80 GB on every node (sinfo's order stands); cpu has them on half.
    assert chain(Need(gpus=2, prefer="max")) == ("h100", "mixed", "cpu", "a100", "untyped", "mystery")


def test_memory_bounds_keep_only_gpus_known_to_fit() -> None:
    assert chain(Need(gpus=2, min_vram_gb=60)) == ("h100", "mixed", "cpu")
    assert chain(Need(gpus=1, min_vram_gb=20, max_vram_gb=48)) == ("a100", "cpu")
    assert chain(Need(gpus=4, min_vram_gb=60, prefer="max")) == ("h100", "mixed", "cpu")


def test_gpus_per_node_must_fit_on_one_node() -> None:
    assert chain(Need(gpus=3, max_vram_gb=48)) == ()
    nothing = partitions.choose(summary(), Need(gpus=16))
    assert nothing == Candidates((), "no partition that is up has nodes with 16 GPUs")


def test_named_partitions_keep_their_order_and_drop_only_what_cannot_fit() -> None:
    assert chain(Need(gpus=1, named=("h100", "a100", "nosuch"))) == ("h100", "a100", "nosuch")
    assert chain(Need(gpus=4, named=("a100", "h100"))) == ("h100",)
    assert chain(Need(named=("cpu",))) == ("cpu",)
    empty = partitions.choose(summary(), Need(gpus=4, min_vram_gb=100, named=("a100", "h100")))
    assert empty == Candidates((), "none of --partitions a100,h100 has nodes with 4 GPUs with at least 100 GB each")


def test_the_gpu_type_is_named_only_when_memory_bounds_rule_some_out() -> None:
    by_name = {p.name: p for p in summary()}
    assert partitions.gpu_type_for(by_name["cpu"], Need(gpus=2)) is None
    assert partitions.gpu_type_for(by_name["cpu"], Need(gpus=2, min_vram_gb=60)) == "h100"
    assert partitions.gpu_type_for(by_name["mixed"], Need(gpus=2, max_vram_gb=20)) == "v100"
    assert partitions.gpu_type_for(None, Need(gpus=2, min_vram_gb=60)) is None


# ---------------------------------------------------------------- fallback

SETTINGS = {"after_failures": 2, "retry_preferred_sec": 600.0}
CHAIN = Candidates(("a100", "h100", "cpu"))


def ended(number: int, partition: str, cause: str, at: float) -> Attempt:
    return Attempt(number=number, state="ended", backend="slurm", submitted_at=at - 1, ended_at=at, cause=cause,
                   partition=partition)


def test_without_a_chain_there_is_nothing_to_choose() -> None:
    assert partition_policy.choose(None, [], SETTINGS, 0) == partition_policy.Choice(None)


def test_an_empty_chain_waits_with_the_reason() -> None:
    choice = partition_policy.choose(Candidates((), "no partition that is up has nodes with 16 GPUs"), [], SETTINGS, 0)
    assert choice.partition is None and choice.wait == "no partition that is up has nodes with 16 GPUs"


def test_the_first_attempt_goes_to_the_preferred_partition() -> None:
    assert partition_policy.choose(CHAIN, [], SETTINGS, 0) == partition_policy.Choice("a100")


def test_one_failure_is_not_enough_to_fall_back() -> None:
    attempts = [ended(1, "a100", "node_fault", 100)]
    assert partition_policy.choose(CHAIN, attempts, SETTINGS, 101) == partition_policy.Choice("a100")


def test_n_failures_in_a_row_fall_back_at_once() -> None:
    attempts = [ended(1, "a100", "node_fault", 100), ended(2, "a100", "submit_failed", 110)]
    choice = partition_policy.choose(CHAIN, attempts, SETTINGS, 111)
    assert (choice.partition, choice.switched) == ("h100", True)
    assert choice.reason == "partition a100 failed 2 times in a row; falling back to h100"


def test_a_good_outcome_breaks_the_streak_and_neutral_ones_do_not() -> None:
    attempts = [ended(1, "a100", "lost", 100), ended(2, "a100", "workload_failure", 110),
                ended(3, "a100", "heartbeat_stall", 120)]
    assert partition_policy.choose(CHAIN, attempts, SETTINGS, 121).partition == "a100"
    attempts = [ended(1, "a100", "lost", 100), ended(2, "a100", "stopped", 110), ended(3, "a100", "preempted", 120)]
    assert partition_policy.choose(CHAIN, attempts, SETTINGS, 121).partition == "h100"


def test_the_preferred_partition_is_retried_after_the_retry_period_then_dropped_again_on_one_failure() -> None:
    attempts = [ended(1, "a100", "node_fault", 100), ended(2, "a100", "node_fault", 110),
                ended(3, "h100", "success", 300)]
    assert partition_policy.choose(CHAIN, attempts, SETTINGS, 709).partition == "h100"
    back = partition_policy.choose(CHAIN, attempts, SETTINGS, 710)
    assert (back.partition, back.switched) == ("a100", True)
    assert back.reason == "retrying the preferred partition a100 (left h100 after 600s)"
    attempts.append(ended(4, "a100", "node_fault", 720))
    assert partition_policy.choose(CHAIN, attempts, SETTINGS, 721).partition == "h100"


def test_when_everything_is_tripped_the_one_that_recovers_first_is_used() -> None:
    attempts = [ended(n, p, "node_fault", at) for n, (p, at) in enumerate(
        [("a100", 100), ("a100", 101), ("h100", 200), ("h100", 201), ("cpu", 50), ("cpu", 51)], start=1)]
    assert partition_policy.choose(CHAIN, attempts, SETTINGS, 300).partition == "cpu"


def test_zero_after_failures_never_falls_back() -> None:
    attempts = [ended(n, "a100", "node_fault", 100 + n) for n in range(1, 6)]
    assert partition_policy.choose(CHAIN, attempts, {"after_failures": 0}, 200).partition == "a100"


def test_a_partition_no_longer_offered_is_left_at_once() -> None:
    attempts = [ended(1, "gone", "success", 100)]
    choice = partition_policy.choose(CHAIN, attempts, SETTINGS, 101)
    assert (choice.partition, choice.switched) == ("a100", True)
    assert choice.reason == "partition gone is no longer offered; falling back to a100"
