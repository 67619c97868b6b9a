"""`python -m fray.daemon --home DIR`: the daemon in the foreground (what `fray daemon start` spawns)."""

from fray.daemon.loop import main

raise SystemExit(main())
