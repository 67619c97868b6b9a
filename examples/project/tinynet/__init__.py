"""A small package of the project: its data loading."""
