"""Google Cloud TPU VM backend: slices created with gcloud, one wrapper per host, preemption recovery.

Split by job: `topology` (accelerator type -> hosts and chips), `parse` (gcloud
JSON -> slice records and fray's states), `commands` (the gcloud argv, pure),
`calls` (cloud calls in parallel with bounded concurrency and a create-rate limit),
`launch` (the line every host runs), `backend` (the Backend protocol on top).
"""
