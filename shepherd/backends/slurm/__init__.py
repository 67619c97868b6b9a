"""The Slurm backend: batch jobs found again by name, watched in one squeue per cycle.

`backend` answers the protocol; `script` builds the batch script (pure); `parse`
reads what Slurm's commands print; `partitions` reads `sinfo` into partitions and GPUs.
"""
