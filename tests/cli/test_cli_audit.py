"""`fray audit verify|show`: every control action is recorded, and tampering shows."""

from __future__ import annotations

import json

from conftest import run_fray, schema_validate


def test_control_actions_are_audited_and_verified(home):
    run_fray("nodes", "ban", "n1", check=True)
    run_fray("nodes", "unban", "n1", check=True)
    verified = run_fray("audit", "verify", "--json", check=True)
    data = json.loads(verified.stdout)
    schema_validate("cli-audit-verify", data)
    assert data == {"path": str(home.audit), "lines": 2, "ok": True, "problems": [], "first_bad_line": None}
    shown = json.loads(run_fray("audit", "show", "--json", check=True).stdout)
    schema_validate("cli-audit-show", shown)
    assert [e["action"] for e in shown["entries"]] == ["nodes.ban", "nodes.unban"]
    assert "nodes.unban" in run_fray("audit", "show", check=True).stdout


def test_an_edited_line_is_reported_with_its_number_and_exit_1(home):
    for node in ("n1", "n2", "n3"):
        run_fray("nodes", "ban", node, check=True)
    lines = home.audit.read_text().splitlines()
    entry = json.loads(lines[1])
    entry["user"] = "someone-else"
    home.audit.write_text("\n".join([lines[0], json.dumps(entry), lines[2]]) + "\n")
    broken = run_fray("audit", "verify")
    assert broken.returncode == 1
    assert "broken at line 2" in broken.stdout and "does not match its entry_hash" in broken.stdout


def test_a_removed_line_breaks_the_chain(home):
    for node in ("n1", "n2", "n3"):
        run_fray("nodes", "ban", node, check=True)
    lines = home.audit.read_text().splitlines()
    home.audit.write_text("\n".join([lines[0], lines[2]]) + "\n")
    data = json.loads(run_fray("audit", "verify", "--json").stdout)
    assert data["ok"] is False and data["first_bad_line"] == 2 and "prev_hash differs" in data["problems"][0]
