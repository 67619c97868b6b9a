"""The local backend's warm worker: function and script attempts forked from a Python that imported them once.

Its parts, by role:

    daemon_side    the daemon's side, in the local backend: starts the worker, asks it for wrappers,
                   hears their exits, finds its forks again in /proc
    worker         the worker process: forks a wrapper per request, CPUs' worth at once, the rest queued
    host_pool      which function attempts its function hosts take, handing them over, stopping them,
                   the records of a host that died serving one
    function_host  a host: the wrapper and the workload of function attempt after attempt, in one process
    queueing       which runs may wait in the worker's queue beyond the CPUs (the daemon's ledger asks)

The program the backend starts is `python -m fray.warm.worker`. Everything here
imports only the state, the core and the wrapper, so the backend and the daemon
above can use it: the function entry point a worker forks (fray.cluster.entry,
a layer above) it imports as its workloads do, by running the imports of a
launched run's shim (worker.load_entry). The fork helpers a warm wrapper uses itself stay in the
wrapper, which is standard-library only (fray.wrapper.forked, warm_imports).
"""
