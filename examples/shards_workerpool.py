#!/usr/bin/env python3
#FRAY --name shards-workerpool
# The driver only waits on the jobs it launches: it holds no core (--cpus 0).
#FRAY --cpus 0 --heartbeat-interval 2
"""Use case 3: process data shards on a WorkerPool.

Worker jobs host an executor; `pool.map` sends one shard per task and returns
the results in order. A worker that dies has its task run on another one.

    python examples/shards_workerpool.py
    fray submit examples/shards_workerpool.py --wait
"""

from collections import Counter

from fray import ResourceConfig, WorkerPool, current_cluster

# These jobs do almost no computing (they wait on each other), so they reserve no
# core and the example runs on a 2-core laptop; a real job asks for what it uses.
DEMO_RESOURCES = ResourceConfig(cpus=0)

WORDS = "the quick brown fox jumps over the lazy dog again and again".split()


def make_shard(index: int) -> list[str]:
    """A deterministic stand-in for reading shard `index` from storage."""
    return [WORDS[(index * 7 + i * 3) % len(WORDS)] for i in range(1000)]


def count_words(index: int) -> dict[str, int]:
    return dict(Counter(make_shard(index)))


def main() -> None:
    cluster = current_cluster()
    with WorkerPool(cluster, num_workers=3, resources=DEMO_RESOURCES, name="shards") as pool:
        pool.wait_for_workers(timeout=120)
        total: Counter[str] = Counter()
        for counts in pool.map(count_words, range(12)):
            total.update(counts)
    print(f"counted {sum(total.values())} words in 12 shards; most common: {total.most_common(3)}", flush=True)


if __name__ == "__main__":
    main()
