"""Preflight probes: is this node fit to run the workload? Answered before it starts.

    preflight   which probes run, each under a deadline; exit code and cause of a failure
    probe       ProbeContext (what probes look at) and Finding (what they say)
    runner      external commands with a deadline (kills the process group of a hung one)
    nvidia      pure parsers for nvidia-smi output and CUDA_VISIBLE_DEVICES
    node        FRAY_HOME writable, free disk
    gpu         gpu visibility, mig/container mismatch, trespassers
    cuda        the CUDA smoke test, run as cuda_smoke.py in a child Python
    tpu         accelerator device files and their holders; JAX's device count

Results go to probe.json (schemas/probe.json); `fray.wrapper.attempt` runs the
preflight after the first heartbeat and before the launch, and exits 42, 43
or 44 with failure.json when a probe fails.
"""
