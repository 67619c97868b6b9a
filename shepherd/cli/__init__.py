"""The `fray` command line."""
