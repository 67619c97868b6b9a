"""The crash-only daemon under fire: SIGKILL it at random moments while runs live their lives.

Fifty runs (succeed / fail / flaky / hang) go from submission to their end while
the daemon is killed and restarted over and over. Whatever moment a kill lands
on, every run must reach the end its script calls for, no run may ever have two
attempts alive at once, and no attempt may be lost or started twice.

The schedule is drawn from a seeded random.Random; the seed is printed (and
FRAY_CHAOS_SEED=N replays the same schedule of kills, submissions and stops).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import wait_until
from fray.state import runs, store
from fray.state.layout import Home
from fray.wrapper import tags

pytestmark = pytest.mark.slow

RUNS = 50
KILLS = 32

SCRIPTS = {
    "succeed": "#!/bin/bash\nsleep \"$WORK\"\necho done\n",
    "fail": "#!/bin/bash\nsleep \"$WORK\"\necho 'out of luck' >&2\nexit 1\n",
    # Fails on attempts 1 and 2, succeeds from attempt 3 on.
    "flaky": "#!/bin/bash\nsleep \"$WORK\"\nif [ \"$FRAY_ATTEMPT\" -le 2 ]; then echo 'flaked' >&2; exit 1; fi\necho done\n",
    # Runs until stopped; leaves promptly on SIGTERM (USR1 asks for a checkpoint: ignored here).
    "hang": "#!/bin/bash\ntrap '' USR1\ntrap 'exit 0' TERM\nwhile true; do sleep 0.2; done\n",
}
EXPECTED_END = {"succeed": "completed_success", "fail": "failed", "flaky": "completed_success", "hang": "stopped_manual"}
# How a daemon crash may legitimately end an attempt that never ran: it died after
# recording the intent to submit and before the backend had it (given up, then resubmitted).
NEVER_RAN_CAUSES = {"submit_failed"}


def expected_cause(kind: str, attempt: int) -> str:
    """The cause of attempt `attempt` of a `kind` run that ran its script to the end."""
    return {"succeed": "success", "fail": "workload_failure", "hang": "stopped",
            "flaky": "workload_failure" if attempt <= 2 else "success"}[kind]


@dataclass
class Plan:
    kind: str
    submit_at: float  # seconds into the storm
    work_sec: float
    stop_at: float | None = None  # hang runs: when to ask for the stop
    run_id: str | None = None
    stopped: bool = False


@dataclass
class Watch:
    """Samples /proc continually: records any moment two attempts of one run are alive."""

    home: Home
    violations: list[str] = field(default_factory=list)
    samples: int = 0
    most_wrappers: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> "Watch":
        self._thread = threading.Thread(target=self._loop, name="watch-wrappers", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            self.sample()

    def wrappers(self) -> dict[int, tuple[str, int, int, bytes]]:
        """pid -> (run id, attempt, parent pid, command line) of every live wrapper of this home: started as
        `python -m fray.wrapper run ...`, or forked from the local backend's warm worker (its command line,
        in the attempt's folder: the wrapper's working folder, as the backend finds them)."""
        home_arg = str(self.home.root).encode()
        found = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    raw = handle.read()
                with open(f"/proc/{name}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
            argv = raw.split(b"\0")
            if home_arg not in argv:
                continue
            fields = stat[stat.rindex(b")") + 2:].split()
            if fields[0] == b"Z":
                continue  # exited, not yet reaped: not alive
            attempt = self._started_wrapper(argv, home_arg) or self._forked_wrapper(int(name), argv)
            if attempt is not None:
                found[int(name)] = (*attempt, int(fields[1]), raw)
        return found

    @staticmethod
    def _started_wrapper(argv: list[bytes], home_arg: bytes) -> tuple[str, int] | None:
        if b"fray.wrapper" not in argv:
            return None
        at = argv.index(b"fray.wrapper")
        if at == 0 or argv[at - 1] != b"-m" or argv[at + 1:at + 2] != [b"run"]:
            return None
        values = dict(zip(argv[at + 2::2], argv[at + 3::2]))
        if values.get(b"--home") != home_arg:
            return None
        return values[b"--run-id"].decode(), int(values[b"--attempt"])

    def _forked_wrapper(self, pid: int, argv: list[bytes]) -> tuple[str, int] | None:
        if b"fray.warm.worker" not in argv:
            return None
        try:
            folder = Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            return None
        if folder.parent.name != "attempts" or folder.parent.parent.parent != self.home.runs_dir \
                or not folder.name.isdigit():
            return None  # the warm worker itself, or a wrapper's guardian (in /)
        return folder.parent.parent.name, int(folder.name)

    def sample(self) -> None:
        seen = self.wrappers()
        self.samples += 1
        self.most_wrappers = max(self.most_wrappers, len(seen))
        by_run: dict[str, list[int]] = {}
        for pid, (run_id, _, ppid, _) in seen.items():
            # A wrapper's child between fork and exec still shows the wrapper's command line.
            if ppid not in seen:
                by_run.setdefault(run_id, []).append(pid)
        for run_id, pids in by_run.items():
            if len(pids) < 2:
                continue
            attempts = sorted((seen[p][1], p) for p in pids)
            older, newer = attempts[0], attempts[-1]
            if older[0] != newer[0]:
                # The older wrapper may still be exiting after writing exit.json, its last act:
                # that attempt is over. It counts only if it had not finished while the newer lived.
                if self.home.run(run_id).attempt(older[0]).exit.exists():
                    continue
            if all(_same_process(p, seen[p][3]) for p in pids):
                self.violations.append(f"{run_id}: live wrappers {attempts} at {time.time():.3f}")
        # The workloads' trees too, escaped processes included: by the attempt each carries in its tag.
        trees: dict[str, set[int]] = {}
        for pid, tag in tags.tagged(str(self.home.root)).items():
            trees.setdefault(tag.run_id, set()).add(tag.attempt)
        for run_id, attempts_alive in trees.items():
            if len(attempts_alive) > 1:
                self.violations.append(f"{run_id}: processes of attempts {sorted(attempts_alive)} alive at "
                                       f"{time.time():.3f}")


def _same_process(pid: int, cmdline: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read() == cmdline
    except OSError:
        return False


def start_daemon(home: Home) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.send_signal(signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def test_runs_reach_their_ends_while_the_daemon_is_killed_again_and_again(home, tmp_path, capsys):
    seed = int(os.environ.get("FRAY_CHAOS_SEED") or random.SystemRandom().randrange(2**32))
    with capsys.disabled():
        print(f"\nchaos seed: {seed} (FRAY_CHAOS_SEED={seed} replays this schedule)")
    rng = random.Random(seed)
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 64, "gpus": 0, "poll_interval_sec": 0.2}}))
    scripts = {kind: tmp_path / f"{kind}.sh" for kind in SCRIPTS}
    for kind, path in scripts.items():
        path.write_text(SCRIPTS[kind])

    kinds = ["succeed"] * 14 + ["fail"] * 12 + ["flaky"] * 12 + ["hang"] * 12
    rng.shuffle(kinds)
    plans = [Plan(kind, submit_at=rng.uniform(0, 12), work_sec=round(rng.uniform(0.1, 2.5), 2)) for kind in kinds]
    for plan in plans:
        if plan.kind == "hang":
            plan.stop_at = plan.submit_at + rng.uniform(0.5, 10)
    lifetimes = [rng.uniform(0.1, 1.2) for _ in range(KILLS)]  # how long each daemon lives before its SIGKILL

    watch = Watch(home).start()
    daemon = start_daemon(home)
    kills = 0
    began = time.monotonic()
    try:
        def act_until(moment: float) -> None:
            """Submit and stop what the plan says, until `moment` (seconds into the storm)."""
            while True:
                now = time.monotonic() - began
                for plan in plans:
                    if plan.run_id is None and plan.submit_at <= now:
                        overrides = {"backoff_base_sec": 0.1, "backoff_max_sec": 0.4, "heartbeat_interval_sec": 1.0,
                                     "stop_grace_sec": 1.0, "env": {"WORK": str(plan.work_sec)}}
                        if plan.kind == "fail":
                            overrides["max_retries"] = 1
                        plan.run_id = runs.create_run(home, runs.SubmitOptions(
                            script=scripts[plan.kind], overrides=overrides, workdir=str(tmp_path))).run_id
                    if plan.run_id and plan.stop_at is not None and not plan.stopped and plan.stop_at <= now:
                        runs.request(home, plan.run_id, "stop")
                        plan.stopped = True
                if now >= moment:
                    return
                time.sleep(0.01)  # pacing of the storm, not synchronization

        for lifetime in lifetimes:
            act_until(time.monotonic() - began + lifetime)
            kill(daemon)
            kills += 1
            daemon = start_daemon(home)
        act_until(max(p.stop_at or p.submit_at for p in plans))  # whatever the storm had not done yet
        storm = time.monotonic() - began

        def all_ended() -> bool:
            return all(json.loads(home.run(p.run_id).meta.read_text())["phase"] == "ended" for p in plans)

        try:
            wait_until(all_ended, timeout=60, interval=0.2, what="every run to end after the storm")
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}: {exc}; still going:\n" + "\n".join(
                f"{p.kind} {p.run_id}: {home.run(p.run_id).meta.read_text()}" for p in plans
                if json.loads(home.run(p.run_id).meta.read_text())["phase"] != "ended")) from None
    finally:
        kill(daemon)
        watch.stop()
    with capsys.disabled():
        print(f"chaos: {kills} daemon kills in {storm:.1f}s; all {RUNS} runs ended "
              f"{time.monotonic() - began - storm:.1f}s later; {watch.samples} /proc samples, "
              f"at most {watch.most_wrappers} wrappers alive at once")
    assert watch.most_wrappers > 1, "the witness saw no wrappers: it would not see two attempts of one run either"

    causes = Counter(a["cause"] for p in plans for a in json.loads(home.run(p.run_id).meta.read_text())["attempts"])
    adopted = sum(json.loads(line)["kind"] == "adopted" for p in plans
                  for line in home.run(p.run_id).events.read_text().splitlines())
    with capsys.disabled():
        print(f"chaos: attempts by cause {dict(causes)}; {adopted} adoptions by a restarted daemon")
    assert kills >= 30
    assert watch.violations == [], f"seed {seed}: two attempts of one run alive at once"
    problems: list[str] = []
    for plan in plans:
        problems.extend(check_run(home, plan))
    assert problems == [], f"seed {seed}:\n" + "\n".join(problems)


def check_run(home: Home, plan: Plan) -> list[str]:
    """Everything wrong with one run after the storm (empty when it is right)."""
    paths = home.run(plan.run_id)
    meta = json.loads(paths.meta.read_text())
    me = f"{plan.kind} run {plan.run_id}"
    problems = []
    if meta["end"]["status"] != EXPECTED_END[plan.kind]:
        problems.append(f"{me} ended {meta['end']['status']} ({meta['end']['reason']})")
    try:
        ended_record = json.loads(paths.ended.read_text())
    except FileNotFoundError:
        problems.append(f"{me} has no ended.json")
    else:
        if ended_record["status"] != meta["end"]["status"]:
            problems.append(f"{me}: ended.json says {ended_record['status']}")
    attempts = meta["attempts"]
    numbers = [a["number"] for a in attempts]
    if numbers != list(range(1, len(attempts) + 1)):
        problems.append(f"{me}: attempt numbers {numbers}")
    on_disk = sorted(int(p.name) for p in paths.attempts_dir.iterdir()) if paths.attempts_dir.exists() else []
    if not set(on_disk) <= set(numbers):
        problems.append(f"{me}: attempt folders {on_disk} but meta knows {numbers}")
    for attempt in attempts:
        n = attempt["number"]
        files = paths.attempt(n)
        if attempt["state"] != "ended":
            problems.append(f"{me}: attempt {n} still {attempt['state']}")
        starts = files.wrapper_log.read_text().count(f"attempt {n} on ") if files.wrapper_log.exists() else 0
        if starts > 1:
            problems.append(f"{me}: attempt {n} was started {starts} times")
        if files.exit.exists():
            exit_record = json.loads(files.exit.read_text())
            if not files.started.exists() or starts != 1:
                problems.append(f"{me}: attempt {n} exited without one started.json and one start ({starts})")
            if attempt["exit_code"] != exit_record["exit_code"]:
                problems.append(f"{me}: attempt {n} exit {exit_record['exit_code']} recorded as {attempt['exit_code']}")
            if attempt["cause"] != expected_cause(plan.kind, n):
                problems.append(f"{me}: attempt {n} ended {attempt['cause']} ({attempt['detail']})")
        elif attempt["cause"] in NEVER_RAN_CAUSES:
            if starts or files.started.exists():
                problems.append(f"{me}: attempt {n} ran but is recorded as {attempt['cause']}")
        elif not (plan.kind == "hang" and attempt["cause"] == "stopped"):  # killed after its grace period
            problems.append(f"{me}: attempt {n} has no exit.json and ended {attempt['cause']} ({attempt['detail']})")
    ran = [a for a in attempts if a["cause"] not in NEVER_RAN_CAUSES]
    if plan.kind in ("succeed", "flaky") and (not ran or ran[-1]["cause"] != "success"):
        problems.append(f"{me}: did not end with a successful attempt")
    if plan.kind == "fail" and meta["counters"]["workload_failures"] != 2:
        problems.append(f"{me}: {meta['counters']['workload_failures']} workload failures, not 2 (--max-retries 1)")
    errors = [e["reason"] for e in map(json.loads, paths.events.read_text().splitlines())
              if e["kind"] == "error" and "daemon error" in e["reason"]]
    if errors:
        problems.append(f"{me}: the daemon failed handling it: {errors[:2]}")
    return problems


def test_an_attempt_handed_to_the_backend_just_before_the_daemon_died_is_adopted_even_once_finished(home, tmp_path):
    """The narrowest crash window, made deterministic: the daemon recorded attempt 1 as
    `submitting`, started its wrapper, and died before recording that it had. The attempt
    then ran to its end with no daemon watching. The next daemon must adopt it from the
    wrapper's records, not wait forever for a process that is gone, nor run it again."""
    from fray.backends.protocol import AttemptKey, SubmitRequest
    from fray.backends.local.backend import LocalBackend
    from fray.core.model import Attempt, AttemptState, Meta, Phase

    store.ensure_home(home)
    script = tmp_path / "quick.sh"
    script.write_text("#!/bin/bash\necho finished\n")
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path)))
    paths = home.run(meta.run_id)
    # What the dead daemon got done: the intent recorded, then the backend asked.
    meta = Meta.from_dict(json.loads(paths.meta.read_text()))
    meta.phase = Phase.ACTIVE.value
    meta.wait_reason = None
    meta.attempts.append(Attempt(number=1, state=AttemptState.SUBMITTING.value, backend="local",
                                 submitted_at=time.time()))
    store.write_json(paths.meta, meta.to_dict(), "meta")
    LocalBackend(home, {"cpus": 2, "gpus": 0}).submit(SubmitRequest(
        key=AttemptKey(meta.run_id, 1), name=meta.name, spec=meta.spec, home=home.root,
        script=paths.script(meta.script["frozen"]), attempt_dir=paths.attempt(1).dir,
        checkpoint_dir=paths.checkpoints_dir))
    wait_until(paths.attempt(1).exit.exists, what="the orphaned attempt to finish on its own")

    def event_kinds() -> list[str]:
        return [json.loads(line)["kind"] for line in paths.events.read_text().splitlines()] if paths.events.exists() else []

    daemon = start_daemon(home)
    try:
        ended = wait_until(lambda: (m := json.loads(paths.meta.read_text()))["phase"] == "ended" and m,
                           what="the next daemon to adopt the finished attempt")
        # The daemon logs a decision's events just after committing meta.json.
        kinds = wait_until(lambda: "ended" in (k := event_kinds()) and k, what="the run's end to be logged")
    finally:
        kill(daemon)
    assert ended["end"]["status"] == "completed_success"
    assert [(a["number"], a["cause"]) for a in ended["attempts"]] == [(1, "success")]
    assert "adopted" in kinds and "submitted" not in kinds


@pytest.mark.parametrize("started", ["as a new Python", "forked from the warm worker"])
def test_the_watch_would_see_two_live_attempts_of_one_run(home, started):
    """The storm's witness is not blind: stand-ins for wrappers (same command line; for a wrapper the warm worker
    forked, its command line in the attempt's folder) trip it."""
    store.ensure_home(home)

    def stand_in(attempt: int) -> subprocess.Popen[bytes]:
        if started == "as a new Python":
            return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "fray.wrapper", "run",
                                     "--home", str(home.root), "--run-id", "r1", "--attempt", str(attempt)],
                                    start_new_session=True)
        folder = home.run("r1").attempt(attempt).dir
        folder.mkdir(parents=True, exist_ok=True)
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "fray.warm.worker",
                                 "--home", str(home.root)], cwd=folder, start_new_session=True)

    watch = Watch(home)
    first, second = stand_in(1), stand_in(2)
    try:
        wait_until(lambda: len(watch.wrappers()) == 2, what="the stand-ins")
        watch.sample()
        assert len(watch.violations) == 1 and "r1" in watch.violations[0]
        home.run("r1").attempt(1).dir.mkdir(parents=True, exist_ok=True)
        home.run("r1").attempt(1).exit.write_text("{}")  # attempt 1 has finished: merely still exiting
        watch.sample()
        assert len(watch.violations) == 1
        kill(second)
        duplicate = stand_in(1)  # the same attempt started twice
        try:
            wait_until(lambda: len(watch.wrappers()) == 2, what="the duplicate")
            watch.sample()
            assert len(watch.violations) == 2
        finally:
            kill(duplicate)
    finally:
        kill(first)
        kill(second)
