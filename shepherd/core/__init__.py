"""Pure decisions and records: no IO, no clock (`now` is a parameter), no processes.

The model of the state files, `#FRAY` directives, the policy that decides a run's
next step, the normalized status, admission and reservations, family decisions,
partition fallback, schema validation, which status changes to tell people
(notify) and resource use from attempt times (usage). Everything above imports from here;
this package imports nothing of fray but the wrapper's contract.
"""
