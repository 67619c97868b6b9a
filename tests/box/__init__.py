"""Placeholder: the package docstring is written with the API (see box.py)."""
