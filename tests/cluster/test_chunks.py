"""fray.map(chunk=N): many calls in one run, each recorded as it finishes, against a real daemon and real runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import CancelledError
from pathlib import Path

import pytest

import fray
from conftest import run_fray, schema_validate, wait_until
from fray import RemoteTraceback
from fray.errors import UsageError

import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the jobs cannot import this module

pytestmark = pytest.mark.slow


class ParseError(Exception):
    pass


def parse(word: str) -> dict:
    print(f"parsing {word}", flush=True)
    print(f"warning on {word}", file=sys.stderr, flush=True)
    if word == "bad":
        raise ParseError(f"cannot parse {word!r}")
    return {"word": word, "length": len(word)}


def outcomes(futures: list) -> list:
    """What each future says: its value, or its exception's type, message and traceback's last lines."""
    said = []
    for future in futures:
        try:
            said.append(("returned", future.result(timeout=120), future.logs()))
        except Exception as exc:
            cause = exc.__cause__
            tail = cause.text.strip().splitlines()[-2:] if isinstance(cause, RemoteTraceback) else None
            said.append(("raised", type(exc).__name__, str(exc), tail))
    return said


def test_chunked_results_are_those_of_one_run_per_call(home, daemon):
    words = ["alpha", "be", "bad", "delta", "e", "phi", "gamma"]
    plain = fray.map(parse, words, name="plain")
    chunked = fray.map(parse, words, name="chunked", chunk=3)
    assert len(chunked) == len(words) and [f.index for f in chunked] == list(range(len(words)))
    assert len({f.run_id for f in chunked}) == 3  # 3 + 3 + 1 calls
    assert outcomes(chunked) == outcomes(plain)  # values, exceptions (type, message, traceback), stdout
    assert chunked[2].exception().__cause__.text.count("cannot parse 'bad'") == 1
    assert "ParseError" in chunked[2].info().error
    errs = [f.logs(stderr=True) for f in chunked]
    assert errs[:2] + errs[3:] == [f"warning on {w}\n" for w in words if w != "bad"]
    assert errs[2].startswith("warning on bad\nTraceback") and "ParseError: cannot parse 'bad'" in errs[2]
    for future in chunked:  # each batch's record is a call-batch, with a record per call like a run's
        for batch in (home.run(future.run_id).dir / "calls").glob("*.json"):
            schema_validate("call-batch", json.loads(batch.read_text()))
    # The attempt's own stdout still holds every call's output, in order.
    first_run = home.run(chunked[0].run_id).attempt(1).stdout.read_text()
    assert first_run == "parsing alpha\nparsing be\nparsing bad\n"


def test_a_call_that_raises_fails_its_chunk_but_not_the_other_calls(home, daemon):
    futures = fray.map(parse, ["one", "bad", "three", "four"], name="mid", chunk=4)
    with pytest.raises(ParseError, match="cannot parse 'bad'"):
        futures[1].result(timeout=120)
    assert [futures[i].result(timeout=10) for i in (0, 2, 3)] == [
        {"word": w, "length": len(w)} for w in ("one", "three", "four")]
    assert futures[0].exception() is None and isinstance(futures[1].exception(), ParseError)
    (run_id,) = {f.run_id for f in futures}
    status = json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout)
    assert status["run"]["status"] == "failed" and "ParseError" in status["run"]["reason"]
    text = run_fray("status", run_id, home=home.root, check=True).stdout
    assert "3 of 4 calls returned (calls 0-3 of the map)" in text
    listed = json.loads(run_fray("list", "--group", "mid", "--json", home=home.root, check=True).stdout)["runs"]
    assert [(r["run_id"], r["step"]) for r in listed] == [(run_id, 3)]  # STEP: the calls returned
    assert status["family"]["group"]["params"] == {"index": 0, "calls": "0-3"}


def marks_and_dies_once(item: tuple[str, int]) -> int:
    """Leaves a file per try; call 3, on its first try, waits for the test to have seen calls 0-2's results, then
    kills its own process (as an OOM kill or lost node would)."""
    folder, number = item
    tries = Path(folder) / f"call-{number}"
    with open(tries, "a") as handle:
        handle.write("x")
    if number == 3 and tries.read_text() == "x":
        while not (Path(folder) / "seen").exists():
            time.sleep(0.05)  # the job's own pace, not the test's synchronisation
        os.kill(os.getpid(), signal.SIGKILL)
    return number * 10


def test_a_chunk_killed_midway_is_retried_making_only_the_calls_that_had_not_returned(home, daemon, tmp_path):
    futures = fray.map(marks_and_dies_once, [(str(tmp_path), n) for n in range(6)], name="killed", chunk=6,
                       max_retries=1)
    assert [f.result(timeout=120) for f in futures[:3]] == [0, 10, 20]  # committed while call 3 waits
    (tmp_path / "seen").touch()
    assert [f.result(timeout=120) for f in futures] == [0, 10, 20, 30, 40, 50]
    tries = {n: (tmp_path / f"call-{n}").read_text() for n in range(6)}
    assert tries == {0: "x", 1: "x", 2: "x", 3: "xx", 4: "x", 5: "x"}  # 0-2 had their results: not made again
    read_meta = lambda: json.loads(home.run(futures[0].run_id).meta.read_text())  # noqa: E731
    meta = wait_until(lambda: read_meta()["end"] and read_meta(), timeout=60, what="the chunk run to end")
    assert len(meta["attempts"]) == 2 and meta["end"]["status"] == "completed_success"


def fails_on_the_first_attempt(number: int) -> int:
    attempt = int(os.environ["FRAY_ATTEMPT"])
    if number == 1 and attempt == 1:
        raise RuntimeError("first attempt fails")
    return attempt


def test_a_call_that_raised_is_made_again_by_the_retry_and_the_returned_ones_are_not(home, daemon):
    futures = fray.map(fails_on_the_first_attempt, range(3), chunk=3, max_retries=1)
    assert [f.result(timeout=120) for f in futures] == [1, 2, 1]  # call 1 returned on attempt 2; 0 and 2 on 1


def test_chunk_must_be_a_positive_whole_number_and_a_bad_one_writes_nothing(home):
    for bad in (0, -2, 2.5, "4", True):
        with pytest.raises(UsageError, match=r"chunk must be a positive whole number of calls per run"):
            fray.map(parse, ["a"], chunk=bad)
    assert not home.runs_dir.exists() or not list(home.runs_dir.iterdir())
    assert fray.map(parse, [], chunk=5) == []


def test_the_future_of_a_call_is_found_again_by_run_and_index(home, daemon):
    futures = fray.map(parse, ["x", "yy", "zzz"], chunk=2)
    again = fray.get_run(futures[1].run_id, call=1)
    assert again.result(timeout=120) == {"word": "yy", "length": 2} and again.done()
    assert futures[0].run_id == futures[1].run_id != futures[2].run_id
    with pytest.raises(UsageError, match=r"holds calls 0-1, not call 2"):
        fray.get_run(futures[0].run_id, call=2)
    with pytest.raises(UsageError, match=r"not call .1."):
        fray.get_run(futures[0].run_id, call="1")
    plain = fray.map(parse, ["w"])[0]
    with pytest.raises(UsageError, match=r"holds no chunk of calls"):
        fray.get_run(plain.run_id, call=0)


def test_the_docs_chunk_section_runs_as_written(home, daemon, tmp_path):
    from docs_pages import block_under

    snippet = block_under("sweeps.md", "Many short functions in one run", "python").text
    script = tmp_path / "snippet.py"
    script.write_text(snippet)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180,
                          cwd=tmp_path, env={**os.environ, "FRAY_HOME": str(home.root)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        "7 futures in 3 runs", "0 5 parsing alpha", "1 2 parsing be", "2 raised cannot parse 'bad'",
        "3 5 parsing delta", "4 1 parsing e", "5 3 parsing phi", "6 5 parsing gamma", "call 4 again: 1"]


def waits_for_gate(item: tuple[str, int]) -> int:
    gate, number = item
    while number > 0 and not os.path.exists(gate):
        time.sleep(0.05)  # the job's own pace, not the test's synchronisation
    return number


def test_cancelling_a_call_stops_its_chunk_and_calls_that_returned_keep_their_values(home, daemon, tmp_path):
    gate = str(tmp_path / "never")
    futures = fray.map(waits_for_gate, [(gate, n) for n in range(3)], chunk=3)
    assert futures[0].result(timeout=120) == 0  # resolved while its chunk still runs
    assert not futures[1].done()
    assert futures[1].cancel() is True
    with pytest.raises(CancelledError, match="was stopped"):
        futures[2].result(timeout=120)
    assert futures[0].result() == 0 and futures[0].cancel() is False
    assert isinstance(futures[1].exception(), CancelledError)
