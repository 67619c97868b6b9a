"""The state directory (FRAY_HOME): where every file lives, and reading and writing them.

`layout` owns every file name; `store` writes atomically and moves corrupt files
aside; `runs` is the one way to create a run; `audit`, `blacklist`, `config`,
`runtime_commands` and `row_cache` own one file (or folder) each.
"""
