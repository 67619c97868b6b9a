"""`python -m fray.daemon --home DIR`: the daemon in the foreground (see fray.daemon.process)."""

from fray.daemon.process import main

raise SystemExit(main())
