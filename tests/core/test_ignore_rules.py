"""Ignore rules as git reads them: the last matching line decides, `!` brings back, a folder left out stays out."""

from __future__ import annotations

from fray.core import ignore_rules
from fray.core.ignore_rules import Rules, rules_from


def rules(text: str) -> Rules:
    return Rules(rules_from(text, ".frayignore"))


def test_the_last_matching_line_decides_and_says_where_it_was_written():
    r = rules("# data\n*.bin\n!keep.bin\ndata/\n")
    assert r.left_out_by("x/model.bin").source == ".frayignore:2"
    assert r.left_out_by("x/keep.bin") is None
    assert r.left_out_by("data/keep.bin").source == ".frayignore:4"  # its folder is out: it cannot come back alone
    assert r.left_out_by("train.py") is None


def test_a_folder_brought_back_brings_back_what_git_left_out():
    r = rules("!data/\n!*.pt\nlogs/\n")
    assert r.brought_back("data/shakespeare/train.bin") and r.brought_back("out/ckpt.pt")
    assert not r.brought_back("logs/x.txt") and not r.brought_back("model.bin")


def test_anchored_and_folder_only_patterns():
    r = rules("/build\nout/\nsrc/**/gen.py\n")
    assert r.left_out_by("build", True) is not None and r.left_out_by("src/build", True) is None
    assert r.left_out_by("out", False) is None and r.left_out_by("out/x", False) is not None
    assert r.left_out_by("src/a/b/gen.py") is not None and r.left_out_by("src/gen.py") is not None


def test_an_escaped_hash_or_bang_is_a_name():
    r = rules("\\#notes\n\\!important\n")
    assert r.left_out_by("#notes") is not None and r.left_out_by("!important") is not None


def test_the_plain_pattern_helpers_drop_negations_for_readers_that_know_none():
    assert ignore_rules.patterns_from("*.log\n!keep.log\n# c\n") == ["*.log"]
    assert ignore_rules.ignored("a.log", False, ["*.log"]) and not ignore_rules.ignored("a.txt", False, ["*.log"])
