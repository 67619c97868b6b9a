"""The ledger's room for a backend's own queue of functions (fray.core.scheduler, `queue_cpus`).

Functions that may queue on the machine are admitted past its CPUs, up to the queue's depth; nothing else is,
and while something else holds CPUs nothing is queued past them, so no more run at once than there are CPUs.
"""

from __future__ import annotations

from fray.core.capacity import Capacity, run_request
from fray.core.scheduler import Ledger

FUNCTION = run_request(1, None, 0, queueable=True)
SCRIPT = run_request(1, None, 0)


def ledger() -> Ledger:
    return Ledger(Capacity(cpus=2, mem_mb=None, gpus=1), queue_cpus=4)


def test_functions_are_admitted_past_the_cpus_up_to_the_queue_and_say_so_when_it_is_full():
    machine = ledger()
    assert [machine.admit(FUNCTION).admitted for _ in range(7)] == [True] * 6 + [False]
    assert machine.admit(FUNCTION).reason == "waiting for resources: 1 CPUs wanted, 0 of 2 free and the machine's queue full"


def test_a_script_waits_until_the_queued_and_running_functions_leave_it_a_cpu():
    machine = ledger()
    for _ in range(2):
        assert machine.admit(FUNCTION).admitted
    assert not machine.admit(SCRIPT).admitted
    assert machine.admit(SCRIPT).reason == "waiting for resources: 1 CPUs wanted, 0 of 2 free"


def test_nothing_queues_past_the_cpus_while_a_script_holds_one():
    machine = ledger()
    assert machine.admit(SCRIPT).admitted
    assert machine.admit(FUNCTION).admitted
    assert not machine.admit(FUNCTION).admitted  # one CPU each: the worker would otherwise share the script's


def test_a_function_with_a_gpu_or_replicas_does_not_queue():
    assert not run_request(1, None, 1, queueable=True).queueable
    assert not run_request(1, None, 0, replicas=2, queueable=True).queueable
    machine = ledger()
    machine.hold(FUNCTION)
    machine.hold(FUNCTION)
    assert not machine.admit(run_request(1, None, 1, queueable=True)).admitted


def test_a_trial_leaves_the_ledger_as_it_was():
    machine = ledger()
    assert machine.explain(FUNCTION) == ""
    trial = machine.copy()
    trial.admit(FUNCTION)
    assert machine.used_cpus == 0 and trial.used_cpus == 1
