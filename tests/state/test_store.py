"""The state store: atomic private writes, validated reads, corrupt files moved aside, never crashed on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import SCHEMAS, reference_validator
from fray.state import audit, store
from fray.core import validation
from fray.errors import CorruptFileError, StateError
from fray.state.layout import Home
from fray.core.model import Control

GOOD_CONTROL = Control(updated_at=1.0).to_dict()


def test_writes_are_atomic_private_and_leave_no_temp_files(tmp_path: Path):
    target = tmp_path / "control.json"
    store.write_json(target, GOOD_CONTROL, "control")
    assert json.loads(target.read_text()) == GOOD_CONTROL
    assert target.read_bytes().endswith(b"\n")
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["control.json"]


def test_a_writer_refuses_to_write_what_readers_would_reject(tmp_path: Path):
    target = tmp_path / "control.json"
    store.write_json(target, GOOD_CONTROL, "control")
    with pytest.raises(ValueError, match="paused: expected boolean"):
        store.write_json(target, {**GOOD_CONTROL, "paused": "yes"}, "control")
    assert json.loads(target.read_text()) == GOOD_CONTROL  # the good file is untouched


@pytest.mark.parametrize("content, problem", [
    (b"", "the file is empty"),
    (b"   \n", "the file is empty"),
    (b'{"paused": fal', "not valid JSON"),
    (b"\x00\xff garbage", "not valid JSON"),
    (b'{"schema_version": 1, "paused": "no", "stop_requested": false, "restart_nonce": 0, "start_nonce": 0, "updated_at": 1}',
     "$.paused: expected boolean, got string"),
    (b"[]", "expected object, got array"),
])
def test_a_corrupt_file_is_moved_aside_and_reported(tmp_path: Path, content: bytes, problem: str):
    target = tmp_path / "control.json"
    target.write_bytes(content)
    with pytest.raises(CorruptFileError) as caught:
        store.read_json(target, "control")
    assert problem in caught.value.problem
    assert not target.exists()
    moved = caught.value.moved_to
    assert moved is not None and moved.name.startswith("control.json.corrupt-")
    assert moved.read_bytes() == content  # kept for a person to look at, never overwritten
    assert store.read_json(target, "control") is None


def test_a_file_replaced_by_a_writer_meanwhile_is_not_moved_aside(tmp_path: Path):
    target = tmp_path / "control.json"
    target.write_bytes(b"not json")
    stale_inode = target.stat().st_ino
    store.write_json(target, GOOD_CONTROL, "control")  # a writer replaced it after the read
    assert store.quarantine(target, stale_inode) is None
    assert json.loads(target.read_text()) == GOOD_CONTROL


def test_a_good_file_that_took_the_corrupt_ones_inode_number_is_put_back(tmp_path: Path):
    """A writer renaming in a new file between the reader's check and its move, on a filesystem that reused
    the freed inode number (a lease renewed many times a second): the reader takes it, sees it is not what it
    read, and puts it back."""
    target = tmp_path / "control.json"
    store.write_json(target, GOOD_CONTROL, "control")
    reused_inode = target.stat().st_ino
    assert store.quarantine(target, reused_inode, read=b"not json") is None
    assert json.loads(target.read_text()) == GOOD_CONTROL
    assert [p.name for p in tmp_path.iterdir()] == ["control.json"]


def test_write_once_files_are_never_overwritten(tmp_path: Path):
    target = tmp_path / "ended.json"
    record = {"run_id": "r", "status": "failed", "reason": "x", "ended_at": 1.0, "attempts": 1}
    assert store.create_json(target, record, "ended") is True
    assert store.create_json(target, {**record, "reason": "y"}, "ended") is False
    assert json.loads(target.read_text())["reason"] == "x"


def test_json_lines_report_a_cut_line_instead_of_failing(tmp_path: Path):
    events = tmp_path / "events.jsonl"
    store.append_jsonl(events, {"at": 1.0, "run_id": "r", "kind": "submitted", "reason": "a"}, "event")
    with open(events, "ab") as handle:
        handle.write(b'{"at": 2.0, "run_id": "r", "ki')  # a crash mid-append
    lines = list(store.read_jsonl(events, "event"))
    assert lines[0].record["reason"] == "a"
    assert lines[1].record is None and "not valid JSON" in lines[1].problem


def test_an_unusable_home_is_a_clear_error(tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StateError, match="cannot create the state directory .* --home DIR or FRAY_HOME"):
        store.ensure_home(Home(blocker / "fray"))


def test_home_is_private(tmp_path: Path):
    home = Home(tmp_path / "h")
    store.ensure_home(home)
    assert home.root.stat().st_mode & 0o777 == 0o700


def test_the_cached_reader_rereads_only_changed_files(tmp_path: Path):
    target = tmp_path / "control.json"
    store.write_json(target, GOOD_CONTROL, "control")
    reader = store.CachedReader()
    first = reader.read(target, "control")
    assert reader.read(target, "control") is first
    store.write_json(target, {**GOOD_CONTROL, "paused": True}, "control")
    assert reader.read(target, "control")["paused"] is True


def test_the_heartbeat_reader_treats_garbage_as_no_heartbeat(tmp_path: Path):
    beat = tmp_path / "heartbeat"
    assert store.read_heartbeat(beat) is None
    beat.write_text("1700000000.5\n")
    assert store.read_heartbeat(beat) == 1700000000.5
    beat.write_text("garbage")
    assert store.read_heartbeat(beat) is None


def test_every_schema_is_valid_json_schema_and_compiles_in_the_runtime_validator():
    import jsonschema

    names = sorted(p.stem for p in SCHEMAS.glob("*.json"))
    assert {"meta", "control", "progress", "failure", "final", "exit", "ended", "probe", "blacklist", "daemon",
            "event"} <= set(names)
    for name in names:
        jsonschema.Draft202012Validator.check_schema(json.loads((SCHEMAS / f"{name}.json").read_text()))
        validation.validator(name)


@pytest.mark.parametrize("document", [
    GOOD_CONTROL,
    {**GOOD_CONTROL, "paused": 1},
    {**GOOD_CONTROL, "restart_nonce": -1},
    {**GOOD_CONTROL, "restart_nonce": 1.5},
    {**GOOD_CONTROL, "extra": True},
    {k: v for k, v in GOOD_CONTROL.items() if k != "paused"},
    {**GOOD_CONTROL, "schema_version": 2},
    "a string",
])
def test_the_runtime_validator_agrees_with_the_reference_implementation(document):
    import jsonschema

    reference = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "control.json").read_text()))
    assert (not validation.errors("control", document)) == reference.is_valid(document)


def _one_change_each(document: object):
    """The document, then every document that differs from it in one place: a key dropped, a value
    of the wrong kind or out of range, at every depth."""
    yield document
    wrong = (None, "x", "", -1, 0, 1.5, True, [], {}, ["x"])
    if isinstance(document, dict):
        for key, value in document.items():
            yield {k: v for k, v in document.items() if k != key}
            for bad in wrong:
                yield {**document, key: bad}
            for changed in list(_one_change_each(value))[1:]:
                yield {**document, key: changed}
        yield {**document, "unexpected": 1}
    elif isinstance(document, list):
        for index, value in enumerate(document):
            for changed in list(_one_change_each(value))[1:]:
                yield [*document[:index], changed, *document[index + 1:]]


def _real_documents(tmp_path: Path) -> list[tuple[str, object]]:
    from fray.state import runs
    from fray.core.model import Attempt, End, Meta

    home = Home(tmp_path / "h")
    store.ensure_home(home)
    script = tmp_path / "job.py"
    script.write_text("#FRAY --gpus 1 --env A=1\n#SBATCH --time=1:00:00\nprint(1)\n")
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}))
    ended = Meta.from_dict(meta.to_dict())
    ended.attempts = [Attempt(number=1, state="ended", backend="local", submitted_at=1.0, started_at=2.0, ended_at=3.0,
                              exit_code=0, cause="success", node="n1", backend_ref={"pid": 7})]
    ended.phase, ended.end = "ended", End(status="completed_success", reason="done", at=3.0)
    return [("meta", meta.to_dict()), ("meta", ended.to_dict()),
            ("control", json.loads(home.run(meta.run_id).control.read_text())),
            ("progress", {"updated_at": 1.0, "step": 3, "loss": 0.5, "metrics": {"acc": 0.9}}),
            ("event", {"at": 4.0, "run_id": meta.run_id, "kind": "submitted", "attempt": 1,
                       "reason": "attempt 1 submitted to local", "data": {"ref": {"pid": 7}, "exclude": ["n2"]}})]


def test_both_runtime_validators_agree_with_the_reference_on_every_one_change_variant(tmp_path):
    """The generated fast check and the explaining validator, against `jsonschema`, document by document."""
    checked = 0
    for name, document in _real_documents(tmp_path):
        reference = reference_validator(name)
        fast, explaining = validation.is_valid(name), validation.validator(name)
        for variant in _one_change_each(document):
            expected = reference.is_valid(variant)
            assert fast(variant) == expected, (name, variant)
            assert (not explaining(variant, "$")) == expected, (name, variant)
            checked += 1
    assert checked > 1500


def test_a_schema_keyword_the_runtime_cannot_check_is_refused():
    with pytest.raises(validation.SchemaCompileError, match="not supported"):
        validation._compile({"type": "object", "patternProperties": {}}, {}, {})


def test_the_audit_log_is_hash_chained_and_tampering_shows(tmp_path: Path):
    home = Home(tmp_path / "h")
    store.ensure_home(home)
    audit.record(home, "control.stop", "run-a")
    audit.record(home, "control.start", "run-a")
    assert audit.verify(home) == []
    lines = home.audit.read_text().splitlines()
    edited = json.loads(lines[0])
    edited["action"] = "control.pause"
    home.audit.write_text(json.dumps(edited) + "\n" + lines[1] + "\n")
    assert any("does not match its entry_hash" in p for p in audit.verify(home))


def test_runs_of_one_name_in_one_second_never_share_an_id(tmp_path, monkeypatch):
    """Their ids differ only by 4 random hex digits: a taken id is drawn again, never overwritten or refused."""
    from fray.state import runs
    from fray.state.layout import Home

    home = Home(tmp_path / "home")
    draws = iter(["beef", "beef", "beef", "cafe", "beef", "d00d"])
    monkeypatch.setattr(runs, "_random_hex", lambda: next(draws))
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    monkeypatch.setattr(runs.time, "time", lambda: 1_790_000_000.0)
    ids = [runs.create_run(home, runs.SubmitOptions(script=script, overrides={})).run_id for _ in range(3)]
    assert [i[-4:] for i in ids] == ["beef", "cafe", "d00d"]
    assert sorted(home.run_ids()) == sorted(ids)
