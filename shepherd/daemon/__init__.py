"""The daemon: the reconcile loop that keeps every run progressing (`python -m fray.daemon`).

`loop` is the cycle; `lease` says whether a daemon serves a FRAY_HOME and starts
or stops one; `family` is the loop's side of the cluster API (groups, reservations,
actor endpoints); `alerts` runs a person's hooks when a status changes;
`notifications` tells people (Slack-compatible webhook, e-mail) through `sinks`,
each sink sending from its own `outbox` thread, never from the loop.
"""
