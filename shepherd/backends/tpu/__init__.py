"""Google Cloud TPU VM backend: slices created with gcloud, one wrapper per host, preemption recovery.

Split by job: `parse` (gcloud JSON -> slice records and fray's states),
`command_lines` (the gcloud argv, pure), `calls` (cloud calls in parallel with
bounded concurrency and a create-rate limit), `launch` (the line every host
runs), `hosts` (every host's heartbeat and exit), `backend` (the Backend
protocol on top). The accelerator table (type -> hosts and chips) is
`fray.core.tpu_topology`, and where a run's tasks go on a slice is
`fray.core.placement.tpu`: both pure, so `fray submit` checks them too.
"""
