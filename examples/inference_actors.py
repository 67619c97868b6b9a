#!/usr/bin/env python3
#FRAY --name inference-actors
# The driver only waits on the jobs it launches: it holds no core (--cpus 0).
#FRAY --cpus 0 --heartbeat-interval 2
"""Use case 2: inference servers as actors, and a client that calls them through a pool.

Each server job hosts an "inference" actor (a stand-in model). The client finds
them all by name and spreads its prompts over them round robin with
`pool.call()`; `pool.broadcast()` reaches every server at once.

    python examples/inference_actors.py
    fray submit examples/inference_actors.py --wait
"""

import os
import threading

from fray import (ActorServer, ClusterResolver, Entrypoint, JobRequest, ResourceConfig, current_cluster)

# These jobs do almost no computing (they wait on each other), so they reserve no
# core and the example runs on a 2-core laptop; a real job asks for what it uses.
DEMO_RESOURCES = ResourceConfig(cpus=0)

SERVERS = 3


class Model:
    """A pretend language model: answers with the prompt reversed, and says who answered."""

    def __init__(self, replica: int) -> None:
        self.replica = replica
        self.served = 0

    def generate(self, ctx, prompt: str) -> str:
        self.served += 1
        return f"[replica {self.replica}] {prompt[::-1]}"

    def stats(self, ctx) -> dict:
        return {"replica": self.replica, "served": self.served, "job": ctx.job_id}


def serve(replica: int) -> None:
    """An inference server job: register the model, serve until the client stops it."""
    stop = threading.Event()

    class Control:
        def shutdown(self, ctx) -> None:
            stop.set()

    server = ActorServer(current_cluster())
    server.register("inference", Model(replica), {"replica": replica})
    server.register("inference-control", Control())
    server.serve_background()
    stop.wait()
    server.shutdown(grace=1.0)


def main() -> None:
    cluster = current_cluster()
    jobs = [cluster.launch(JobRequest(f"server-{i}", Entrypoint.from_callable(serve, (i,)),
                                      resources=DEMO_RESOURCES)) for i in range(SERVERS)]
    pool = ClusterResolver(cluster).lookup("inference")
    pool.wait_for_size(SERVERS, timeout=120)
    for prompt in ["hello world", "fray actors", "round robin", "one more", "and another", "last"]:
        print(pool.call().generate(prompt), flush=True)
    served = sorted(f.result(timeout=30)["served"] for f in pool.broadcast().stats())
    print(f"client: {SERVERS} servers answered {sum(served)} prompts ({served})", flush=True)
    for future in ClusterResolver(cluster).lookup("inference-control").broadcast().shutdown():
        future.result(timeout=30)
    cluster.wait(jobs, raise_on_failure=True, timeout=120)
    print(f"client: done in namespace {cluster.namespace} (pid {os.getpid()})", flush=True)


if __name__ == "__main__":
    main()
