"""Every use case a person can trigger and every read model a screen shows, once.

Front ends (cli, tui) parse input and render output; everything they do or
show is a plain function here, over the state directory, front-end neutral.
They never import each other, nothing here imports them, and of fray they
import only ops, core, errors and the FRAY_HOME they pass down (a contract in
pyproject.toml says which, and why the CLI's `--remote` also reaches fray.remote).

    lookup        the run a person named (RUN: id, prefix, name), its meta and control
    read models   views (run rows, `fray list`, `fray status`), live (rows kept current,
                  recent events, file changes), detail (one run in full, its summaries),
                  queue, nodes (inventory and bans), partitions (Slurm, via its backend),
                  usage (CPU-, GPU-, TPU chip-hours and goodput from attempt times), clusters
                  (list and usage of this machine and every remote host, merged)
    actions       control (stop/start/restart/pause/unpause, ban a run's node), nodes
                  (ban, unban), settings (a live run's safe settings), runtime (tune, pause
                  --in-process, resume, terminate), submit (preview, create)
    output        logs (read, tail, follow across attempts), wait (until a run ends)
    words         human (durations, times, sizes, icons: what every front end prints)

Actions record intent; making sure a daemon acts on it is the front end's last
step (fray.ops.daemon.ensure_running), since the dashboard does it in a thread.
"""
