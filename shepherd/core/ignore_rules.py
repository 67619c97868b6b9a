"""Which project files a code snapshot or a sync leaves out: gitignore-style rules, and which one left each out. Pure.

The common gitignore forms are understood: comments, `name`, `*.ext`, `dir/`, `/anchored`, `a/**/b`,
and `!pattern`, which brings back what an earlier line (or, in a git work tree, git) left out. As in
git the last line that matches a path decides, and a file inside a folder that is left out cannot be
brought back alone: bring back the folder (`!data/`), or leave out its contents instead (`data/*`).

Which files apply is the caller's (fray.state.snapshots): `.frayignore` always; `.gitignore` only as
git itself applies it, in a git work tree. Every rule knows where it was written (`.frayignore:3`), so
a snapshot can say what each one left out.
"""

from __future__ import annotations

import fnmatch
import posixpath
from typing import NamedTuple

FRAY_IGNORE = ".frayignore"
IGNORE_FILES = (".gitignore", FRAY_IGNORE)
# Never code: version control, byte code, and fray's own sync manifest. Left out without a word.
ALWAYS_IGNORED = (".git/", "__pycache__/", "*.pyc", ".fray-sync.json")
ALWAYS_SOURCE = "always"


class Rule(NamedTuple):
    """One line of an ignore file: its pattern (without `!` and the trailing `/`), and where it was written."""

    pattern: str
    negated: bool
    dir_only: bool
    anchored: bool
    source: str  # ".frayignore:3", or "always" for ALWAYS_IGNORED

    @property
    def text(self) -> str:
        """The line as written (`!data/`, `*.bin`)."""
        return ("!" if self.negated else "") + ("/" if self.anchored and "/" not in self.pattern else "") \
            + self.pattern + ("/" if self.dir_only else "")

    def matches(self, rel: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        if self.anchored:
            return fnmatch.fnmatchcase(rel, self.pattern) or fnmatch.fnmatchcase(rel, self.pattern.replace("**/", ""))
        return fnmatch.fnmatchcase(posixpath.basename(rel), self.pattern)


def parse_line(line: str, source: str) -> Rule | None:
    """The rule of one ignore-file line; None for a comment or a blank line."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    if line.startswith("\\"):  # `\#name`, `\!name`: a name that starts with # or !
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    return Rule(line.lstrip("/"), negated, dir_only, anchored, source)


def rules_from(text: str, name: str) -> list[Rule]:
    """The rules of one ignore file's text, each knowing its line (`name:3`)."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        rule = parse_line(line, f"{name}:{number}")
        if rule is not None:
            found.append(rule)
    return found


def always_rules() -> list[Rule]:
    return [rule for rule in (parse_line(text, ALWAYS_SOURCE) for text in ALWAYS_IGNORED) if rule is not None]


def patterns_from(text: str) -> list[str]:
    """The patterns of one ignore file's text that leave files out (comments, blank lines and `!` lines dropped):
    for a reader that knows no negation (the remote sync's manifest of what it skipped)."""
    return [rule.text for rule in rules_from(text, "") if not rule.negated]


def last_match(rel: str, is_dir: bool, rules: list[Rule]) -> Rule | None:
    """The last rule that matches the path `rel` (posix, relative to the root): the one that decides."""
    for rule in reversed(rules):
        if rule.matches(rel, is_dir):
            return rule
    return None


def ignored(rel: str, is_dir: bool, patterns: list[str]) -> bool:
    """Whether `rel` matches one of gitignore-style `patterns` (no negation: see `Rules` for that)."""
    rules = [rule for rule in (parse_line(p, "") for p in patterns) if rule is not None]
    found = last_match(rel, is_dir, rules)
    return found is not None and not found.negated


class Rules:
    """Whether paths are left out, themselves or through a folder they are in, and by which rule; each
    folder's answer worked out once (a git listing names files, not their folders)."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self.folders: dict[str, Rule | None] = {"": None}

    def folder(self, rel: str) -> Rule | None:
        """The rule that leaves the folder `rel` out (itself or a folder above it), or None."""
        if rel in self.folders:
            return self.folders[rel]
        above = self.folder(posixpath.dirname(rel))
        if above is None:
            found = last_match(rel, True, self.rules)
            above = found if found is not None and not found.negated else None
        self.folders[rel] = above
        return above

    def left_out_by(self, rel: str, is_dir: bool = False) -> Rule | None:
        """The rule that leaves `rel` out, or None when it is kept."""
        above = self.folder(posixpath.dirname(rel))
        if above is not None:
            return above
        found = last_match(rel, is_dir, self.rules)
        return found if found is not None and not found.negated else None

    def brought_back(self, rel: str, is_dir: bool = False) -> bool:
        """Whether a `!` rule is the last to match `rel` or a folder above it (what git left out comes back)."""
        path = rel
        while path:
            found = last_match(path, path != rel or is_dir, self.rules)
            if found is not None:
                return found.negated
            path = posixpath.dirname(path)
        return False

    def ignored(self, rel: str) -> bool:
        return self.left_out_by(rel) is not None


class FolderRules(Rules):
    """`Rules` of plain patterns (no file, no line numbers)."""

    def __init__(self, patterns: list[str]) -> None:
        super().__init__([rule for rule in (parse_line(p, "") for p in patterns) if rule is not None])
