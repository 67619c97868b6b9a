"""`fray tpus [--json]`: configured accelerator types and zones with hosts and chips per slice."""

from __future__ import annotations

import json

from conftest import run_fray, schema_validate


def test_fray_tpus_lists_the_configured_types_with_hosts_and_chips(home):
    home.root.mkdir(parents=True, exist_ok=True)
    home.config.write_text(json.dumps({"tpu": {"zones": ["us-west4-a", "us-east1-d"],
                                               "accelerator_types": ["v4-32", "v5litepod-16", "v6e-8"]}}))
    data = json.loads(run_fray("tpus", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-tpus", data)
    assert {t["accelerator_type"]: (t["chips"], t["hosts"]) for t in data["accelerator_types"]} == {
        "v4-32": (16, 4), "v5litepod-16": (16, 4), "v6e-8": (8, 1)}
    text = run_fray("tpus", home=home.root, check=True).stdout
    assert "v5litepod-16" in text and "us-west4-a, us-east1-d" in text


def test_fray_tpus_without_configuration_says_what_to_set(home):
    text = run_fray("tpus", home=home.root, check=True).stdout
    assert "tpu.accelerator_types" in text and "tpu.zones" in text
