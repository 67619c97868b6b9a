"""`fray nodes` and the control operations that change settings and the blacklist, as a user runs them."""

from __future__ import annotations

import json
import socket

import pytest

from conftest import run_fray, schema_validate, start_daemon, stop_daemon, wait_until

pytestmark = pytest.mark.slow

LOOP = "#!/bin/bash\n#FRAY --heartbeat-interval 0.5 --stop-grace 2\nwhile true; do sleep 0.1; done\n"


def test_ban_list_and_unban_a_node(home):
    banned = run_fray("nodes", "ban", "gpu-node-7", "--ttl", "2h", "--reason", "ECC errors", "--json", check=True)
    change = json.loads(banned.stdout)
    schema_validate("cli-nodes-change", change)
    assert change["entry"]["reason"] == "ECC errors" and change["entry"]["expires_at"] is not None
    forever = json.loads(run_fray("nodes", "ban", "gpu-node-9", "--ttl", "never", "--json", check=True).stdout)
    assert forever["entry"]["expires_at"] is None

    listing = json.loads(run_fray("nodes", "list", "--json", check=True).stdout)
    schema_validate("cli-nodes", listing)
    assert {n["name"]: n["blacklist"]["reason"] for n in listing["nodes"]} == \
        {"gpu-node-7": "ECC errors", "gpu-node-9": "banned by hand"}
    table = run_fray("nodes", "list", check=True).stdout
    assert "gpu-node-7" in table and "banned for 1h59m" in table

    run_fray("nodes", "unban", "gpu-node-7", check=True)
    again = run_fray("nodes", "unban", "gpu-node-7")
    assert again.returncode == 2 and "not blacklisted (blacklisted now: gpu-node-9)" in again.stderr
    audit = [json.loads(line) for line in home.audit.read_text().splitlines()]
    assert [a["action"] for a in audit] == ["nodes.ban", "nodes.ban", "nodes.unban"]


def test_a_bad_ttl_is_a_usage_error(home):
    bad = run_fray("nodes", "ban", "n1", "--ttl", "5x")
    assert bad.returncode == 2 and "--ttl 5x: expected a duration" in bad.stderr
    assert not home.blacklist.exists()


def test_the_node_list_shows_what_the_daemon_found(home, daemon):
    wait_until(lambda: home.nodes.exists(), what="the daemon's inventory")
    listing = json.loads(run_fray("nodes", "list", "--json", check=True).stdout)
    schema_validate("cli-nodes", listing)
    local = [n for n in listing["nodes"] if n["backend"] == "local"]
    assert len(local) == 1 and local[0]["cpus"] >= 1 and local[0]["blacklist"] is None


def test_config_set_changes_a_live_run_and_refuses_what_is_unsafe(home, daemon, tmp_path):
    script = tmp_path / "loop.sh"
    script.write_text(LOOP)
    run_id = json.loads(run_fray("submit", str(script), "--json", check=True).stdout)["run_id"]
    changed = run_fray("control", "config-set", run_id, "max-retries=7", "heartbeat-timeout=5m", "--json", check=True)
    data = json.loads(changed.stdout)
    schema_validate("cli-control", data)
    assert data["settings"] == {"max_retries": 7, "heartbeat_timeout_sec": 300.0}
    status = lambda: json.loads(run_fray("status", run_id, "--json", check=True).stdout)  # noqa: E731
    wait_until(lambda: status()["spec"]["max_retries"] == 7, what="the daemon to apply the change")
    assert any(e["kind"] == "config" for e in status()["events"])

    unsafe = run_fray("control", "config-set", run_id, "cpus=4")
    assert unsafe.returncode == 2 and "cannot change cpus after submit" in unsafe.stderr
    clash = run_fray("control", "config-set", run_id, "heartbeat-timeout=0.2")
    assert clash.returncode == 2 and "must be longer than --heartbeat-interval" in clash.stderr
    misspelt = run_fray("control", "config-set", run_id, "max-retry=3")
    assert misspelt.returncode == 2 and "did you mean max-retries?" in misspelt.stderr
    run_fray("control", "stop", run_id, check=True)


def test_blacklist_add_bans_the_runs_node_and_restarts_it_without_cost(home, daemon, tmp_path):
    script = tmp_path / "loop.sh"
    script.write_text(LOOP)
    run_id = json.loads(run_fray("submit", str(script), "--json", check=True).stdout)["run_id"]
    status = lambda: json.loads(run_fray("status", run_id, "--json", check=True).stdout)  # noqa: E731
    node = wait_until(lambda: status()["run"]["node"] if status()["run"]["status"] == "healthy_running" else None,
                      what="the run to be running")
    added = json.loads(run_fray("control", "blacklist-add", run_id, "--reason", "flaky GPU", "--json", check=True).stdout)
    schema_validate("cli-control", added)
    assert added["node"] == node
    # The local backend's one node is banned: the attempt is stopped and the run waits, saying why.
    held = wait_until(lambda: (s := status())["attempts"][0]["cause"] == "restarted" and "banned" in s["run"]["reason"]
                      and s, what="the run to be held off the banned node")
    assert len(held["attempts"]) == 1 and held["run"]["status"] == "pending"
    assert held["counters"]["workload_failures"] == 0
    listing = json.loads(run_fray("nodes", "list", "--json", check=True).stdout)
    assert [n["blacklist"]["source_run"] for n in listing["nodes"] if n["name"] == node] == [run_id]
    run_fray("control", "blacklist-remove", run_id, check=True)
    assert json.loads(home.blacklist.read_text())["nodes"] == {}
    wait_until(lambda: len(status()["attempts"]) == 2, what="the restart once the node is no longer banned")
    run_fray("control", "stop", run_id, check=True)


def test_a_banned_local_node_gets_no_work_and_runs_wait_as_pending_saying_why(home, daemon, tmp_path):
    node = socket.gethostname()  # the local backend's one node
    run_fray("nodes", "ban", node, "--reason", "bad fan", "--json", check=True)
    script = tmp_path / "ok.py"
    script.write_text("from fray import report\nreport.final(ok=True)\n")
    run_id = json.loads(run_fray("submit", str(script), "--json", check=True).stdout)["run_id"]

    def row() -> dict:
        rows = json.loads(run_fray("list", "--json", check=True).stdout)["runs"]
        return next(r for r in rows if r["run_id"] == run_id)

    waiting = wait_until(lambda: "banned" in (r := row())["reason"] and r, what="the run to wait for the ban")
    assert waiting["status"] == "pending" and node in waiting["reason"] and "bad fan" in waiting["reason"]
    assert not (home.run(run_id).attempts_dir / "1").exists()  # no attempt was started
    run_fray("nodes", "unban", node, check=True)
    done = wait_until(lambda: (r := row())["status"] in ("completed_success", "failed") and r,
                      timeout=60, what="the run to start once the node is unbanned")
    assert done["status"] == "completed_success"


def test_with_the_daemon_down_list_and_nodes_say_so_and_how_old_their_data_is(home, tmp_path):
    script = tmp_path / "loop.sh"
    script.write_text(LOOP)
    daemon = start_daemon(home)
    try:
        wait_until(lambda: home.nodes.exists(), what="the daemon's inventory")
        run_id = json.loads(run_fray("submit", str(script), "--json", check=True).stdout)["run_id"]
        wait_until(lambda: json.loads(run_fray("status", run_id, "--json", check=True).stdout)["run"]["status"]
                   == "healthy_running", what="the run to be running")
    finally:
        stop_daemon(daemon)  # the wrapper and its workload go on; the home fixture kills them afterwards
    listing = run_fray("list", check=True).stdout
    assert "no daemon is running" in listing and "as of its last cycle" in listing
    nodes = run_fray("nodes", "list", check=True).stdout
    assert "warning: the daemon is stopped" in nodes and "these nodes were listed" in nodes
    data = json.loads(run_fray("nodes", "list", "--json", check=True).stdout)
    schema_validate("cli-nodes", data)
    assert data["daemon"]["state"] == "stopped" and data["inventory_at"] is not None
