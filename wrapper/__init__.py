"""The compute-side half of fray: what runs on the node around the workload.

Standard library only, and nothing from `shepherd`: a node with a broken Python
environment must still be able to report its own failure, and the package is
copied as it is onto TPU VMs. `fray.wrapper.contract` is the shared vocabulary
(file names, exit codes, environment variables) that `shepherd` imports.
"""
