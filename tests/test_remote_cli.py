"""`fray ... --remote HOST` end to end: the real CLI, a real sshd, fray bootstrapped into a remote home."""

from __future__ import annotations

import json

import pytest

from tests.conftest import _kill_everything_of, run_fray, wait_until
from tests.remote_support import remote_host, sshd  # noqa: F401

pytestmark = pytest.mark.slow


def test_submit_list_logs_over_remote_match_local(remote_host, tmp_path, monkeypatch):
    remote_home = tmp_path / "remote fray home"
    monkeypatch.setenv("FRAY_REMOTE_HOME", str(remote_home))
    monkeypatch.setenv("FRAY_REMOTE_NO_MASTER", "1")  # no background process outlives the test
    monkeypatch.setenv("FRAY_HOME", str(tmp_path / "laptop home"))  # the laptop's own: never used
    project = tmp_path / "my project"
    project.mkdir()
    (project / "greeting.txt").write_text("hello from the synced copy")  # read from the run's workdir
    (project / "train.py").write_text("import sys\nprint(open('greeting.txt').read(), sys.argv[1:])\n")
    try:
        # An unknown host is refused; `fray remote trust` records it, printing the fingerprint.
        remote_host.known_hosts.write_text("")
        refused = run_fray("list", "--remote", remote_host.alias)
        assert refused.returncode == 255 and "fray remote trust fray-test" in refused.stderr
        trusted = run_fray("remote", "trust", remote_host.alias, check=True)
        assert "SHA256:" in trusted.stdout

        monkeypatch.chdir(project)
        marker = tmp_path / "pwned"
        submitted = run_fray("submit", "train.py", "--remote", remote_host.alias, "--name", f"a $(touch {marker})",
                             "--wait", "--json", "--", "--lr", "3e-4; `touch " + str(marker) + "`", timeout=300)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        assert not marker.exists()
        run_id = json.loads(submitted.stdout.splitlines()[-1])["run_id"]

        remote = run_fray("list", "--json", "--remote", remote_host.alias, check=True)
        local = run_fray("list", "--json", home=remote_home, check=True)
        # The same listing, but for the clock: when it was generated and the daemon's last cycle.
        strip = lambda text: {k: v for k, v in json.loads(text).items() if k not in ("generated_at", "daemon")}  # noqa: E731
        assert strip(remote.stdout) == strip(local.stdout)
        assert json.loads(remote.stdout)["daemon"]["lease"]["pid"] == json.loads(local.stdout)["daemon"]["lease"]["pid"]
        assert [r["run_id"] for r in json.loads(remote.stdout)["runs"]] == [run_id]
        assert json.loads(remote.stdout)["runs"][0]["name"] == f"a $(touch {marker})"

        logs = run_fray("logs", run_id, "--remote", remote_host.alias, check=True)
        assert logs.stdout == run_fray("logs", run_id, home=remote_home, check=True).stdout
        assert logs.stdout == f"hello from the synced copy ['--lr', '3e-4; `touch {marker}`']\n"

        missing = run_fray("status", "no-such-run", "--remote", remote_host.alias)
        assert missing.returncode == run_fray("status", "no-such-run", home=remote_home).returncode != 0
        assert not marker.exists()
    finally:
        _kill_everything_of(remote_home)
