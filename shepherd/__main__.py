"""`python -m fray ...` is the `fray` command: for a script that knows its interpreter but not whether `fray` is on PATH."""

from fray.cli.entry import main

main()
