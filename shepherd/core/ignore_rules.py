"""Which project files a code snapshot or a sync leaves out: gitignore-style patterns. Pure.

The common gitignore forms are understood: comments, `name`, `*.ext`, `dir/`,
`/anchored` and `a/**/b` patterns. Negations (`!x`) are not, and are dropped;
in a git work tree git itself applies `.gitignore` (negations included), and
these rules only add `.frayignore` on top.
"""

from __future__ import annotations

import fnmatch
import posixpath

IGNORE_FILES = (".gitignore", ".frayignore")
# Never code: version control, byte code, and fray's own sync manifest.
ALWAYS_IGNORED = (".git/", "__pycache__/", "*.pyc", ".fray-sync.json")


def patterns_from(text: str) -> list[str]:
    """The patterns of one ignore file's text (comments, blank lines and negations dropped)."""
    patterns = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            patterns.append(line)
    return patterns


def ignored(rel: str, is_dir: bool, patterns: list[str]) -> bool:
    """Whether the path `rel` (posix, relative to the root) matches a gitignore-style pattern."""
    name = posixpath.basename(rel)
    for pattern in patterns:
        dir_only = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        if dir_only and not is_dir:
            continue
        if "/" in pattern:  # anchored to the root
            pattern = pattern.lstrip("/")
            if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(rel, pattern.replace("**/", "")):
                return True
        elif fnmatch.fnmatchcase(name, pattern):
            return True
    return False


class FolderRules:
    """Whether paths are ignored, themselves or through a folder they are in (a git listing names files,
    not their folders), each folder's answer worked out once."""

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = patterns
        self.folders: dict[str, bool] = {"": False}

    def _folder(self, rel: str) -> bool:
        known = self.folders.get(rel)
        if known is None:
            known = self._folder(posixpath.dirname(rel)) or ignored(rel, True, self.patterns)
            self.folders[rel] = known
        return known

    def ignored(self, rel: str) -> bool:
        return self._folder(posixpath.dirname(rel)) or ignored(rel, False, self.patterns)
