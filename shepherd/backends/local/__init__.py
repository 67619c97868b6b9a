"""The embedded local backend: attempts are wrapper processes on this machine."""
