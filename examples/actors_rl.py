#!/usr/bin/env python3
#FRAY --name actors-rl
# The driver only waits on the jobs it launches: it holds no core (--cpus 0).
#FRAY --cpus 0 --heartbeat-interval 2
"""Use case 4: reinforcement learning with a coordinator, actors and rollout workers.

The coordinator (this script) hosts two actors: a curriculum that hands out
tasks and collects their rewards, and a weights store that rollout workers
read. It launches rollout workers as jobs; each one pulls a task and the
latest weights, "plays" an episode and reports the reward. The coordinator
updates the weights after every round until the curriculum is done.

    python examples/actors_rl.py
    fray submit examples/actors_rl.py --wait
"""

import random

from fray import (ActorServer, ClusterResolver, Entrypoint, JobRequest, ResourceConfig, current_cluster)

# These jobs do almost no computing (they wait on each other), so they reserve no
# core and the example runs on a 2-core laptop; a real job asks for what it uses.
DEMO_RESOURCES = ResourceConfig(cpus=0)

WORKERS = 3
ROUNDS = 4
EPISODES_PER_ROUND = 6


class Curriculum:
    """Tasks get harder as rewards improve; rollout workers pull tasks and push rewards."""

    def __init__(self) -> None:
        self.level = 1
        self.round = 0
        self.handed_out = 0
        self.rewards: list[float] = []
        self.done = False

    def next_task(self, ctx) -> dict | None:
        if self.done or self.handed_out >= EPISODES_PER_ROUND:
            return None
        self.handed_out += 1
        return {"level": self.level, "round": self.round, "seed": self.round * 100 + self.handed_out}

    def report(self, ctx, task: dict, reward: float) -> None:
        if task["round"] == self.round:
            self.rewards.append(reward)

    def round_complete(self, ctx) -> bool:
        return len(self.rewards) >= EPISODES_PER_ROUND

    def advance(self, ctx) -> float:
        mean = sum(self.rewards) / len(self.rewards)
        self.level += 1 if mean > 0.5 else 0
        self.round += 1
        self.handed_out, self.rewards = 0, []
        self.done = self.round >= ROUNDS
        return mean

    def finished(self, ctx) -> bool:
        return self.done


class Weights:
    def __init__(self) -> None:
        self.version = 0
        self.params = [0.0, 0.0]

    def get(self, ctx) -> tuple[int, list[float]]:
        return self.version, self.params

    def update(self, ctx, mean_reward: float) -> int:
        self.params = [p + 0.1 * mean_reward for p in self.params]
        self.version += 1
        return self.version


def rollout_worker(worker: int) -> int:
    """A rollout job: play episodes until the curriculum is finished; how many it played."""
    import time

    resolver = ClusterResolver(current_cluster())
    curriculum, weights = resolver.lookup("curriculum"), resolver.lookup("weights")
    curriculum.wait_for_size(1, timeout=120)
    weights.wait_for_size(1, timeout=120)
    played = 0
    while not curriculum.call().finished():
        task = curriculum.call().next_task()
        if task is None:
            time.sleep(0.02)  # this round's episodes are all out; wait for the next round
            continue
        version, params = weights.call().get()
        rng = random.Random(task["seed"])
        reward = min(1.0, max(0.0, rng.random() * 0.5 + sum(params) - 0.05 * task["level"] + 0.4))
        curriculum.call().report(task, reward)
        played += 1
    return played


def main() -> None:
    import time

    cluster = current_cluster()
    server = ActorServer(cluster)
    server.register("curriculum", Curriculum())
    server.register("weights", Weights())
    server.serve_background()
    workers = [cluster.launch(JobRequest(f"rollout-{i}", Entrypoint.from_callable(rollout_worker, (i,)),
                                         resources=DEMO_RESOURCES)) for i in range(WORKERS)]
    resolver = ClusterResolver(cluster)
    curriculum, weights = resolver.lookup("curriculum"), resolver.lookup("weights")
    while not curriculum.call().finished():
        if curriculum.call().round_complete():
            mean = curriculum.call().advance()
            version = weights.call().update(mean)
            print(f"coordinator: round done, mean reward {mean:.3f}, weights v{version}", flush=True)
        else:
            time.sleep(0.02)
    played = [info.result for info in cluster.wait(workers, raise_on_failure=True, timeout=300)]
    print(f"coordinator: {ROUNDS} rounds, {sum(played)} episodes by {WORKERS} workers {played}", flush=True)
    server.shutdown(grace=1.0)


if __name__ == "__main__":
    main()
