"""What a project's snapshot takes, and what it leaves out and why (fray.state.snapshots stores what it takes).

A git work tree is listed by git itself (`git ls-files`: tracked and untracked files, `.gitignore` and
git's other excludes applied exactly as git applies them); a plain folder is walked, and its
`.gitignore` is not applied: outside git it is only a file (a project's data is often named there).
`.frayignore` applies on top of both, with gitignore syntax, its `!` lines bringing back what git or
an earlier line left out (fray.core.ignore_rules). Never code, and left out without a word: `.git/`,
`__pycache__/`, `*.pyc`. Left out and said: virtual environments (a folder holding `pyvenv.cfg`) and
FRAY_HOME when it is inside the project.

Everything left out is an entry with the rule that left it out (`.gitignore:3 *.bin`,
`.frayignore:2 data/`, `a virtual environment`), so `fray submit` can say what it did not take
(`LeftOut.summary`: per rule, counts, bytes and the largest) and the wrapper can tell a job that
failed on a missing file it left out (`LeftOut.record`, runs/<id>/left-out.json). The files of a folder
left out whole are counted by a walk of at most COUNT_LIMIT entries; past that the counts say "at least"
(a virtual environment's and FRAY_HOME's are not counted).
"""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from fray.core import ignore_rules
from fray.errors import UsageError

GIT_TIMEOUT_SEC = 30.0
VENV_MARKER = "pyvenv.cfg"  # a folder holding one is a virtual environment, never code
VENV_RULE = "a virtual environment"
HOME_RULE = "FRAY_HOME"
COUNT_LIMIT = 20_000  # entries walked to count what folders left out whole hold
LARGEST_SHOWN = 3
RECORD_LIMIT = 20_000  # files named in left-out.json (folders left out whole are named as folders)


class Entry(NamedTuple):
    """One thing left out: a file, or a folder (rel ends with "/") with what it holds as far as counted."""

    rel: str
    rule: str
    files: int
    bytes: int
    counted: bool  # False: a folder whose files were not all counted
    largest: tuple[tuple[str, int], ...]  # (rel, bytes), the largest files first


class Listing(NamedTuple):
    files: dict[str, os.stat_result]  # rel -> lstat
    links: dict[str, str]  # rel -> relative target inside the project
    left_out: "LeftOut"


class LeftOut(NamedTuple):
    entries: list[Entry]

    def summary(self) -> dict[str, Any] | None:
        """What was left out, per rule (schemas/meta.json: spec.code.left_out); None when nothing was."""
        if not self.entries:
            return None
        rules: dict[str, dict[str, Any]] = {}
        for entry in self.entries:
            group = rules.setdefault(entry.rule, {"rule": entry.rule, "files": 0, "bytes": 0, "counted": True,
                                                  "largest": []})
            group["files"] += entry.files
            group["bytes"] += entry.bytes
            group["counted"] = group["counted"] and entry.counted
            group["largest"] += [{"path": rel, "bytes": size} for rel, size in entry.largest]
        for group in rules.values():
            group["largest"] = sorted(group["largest"], key=lambda item: (-item["bytes"], item["path"]))[:LARGEST_SHOWN]
        ordered = sorted(rules.values(), key=lambda group: (-group["bytes"], group["rule"]))
        return {"files": sum(g["files"] for g in ordered), "bytes": sum(g["bytes"] for g in ordered),
                "counted": all(g["counted"] for g in ordered), "rules": ordered}

    def record(self, root: Path) -> dict[str, Any]:
        """runs/<id>/left-out.json (schemas/left-out.json): the paths the wrapper looks a missing file up in."""
        files = sorted((e.rel, e.rule) for e in self.entries if not e.rel.endswith("/"))
        return {"root": str(root), "folders": sorted(e.rel for e in self.entries if e.rel.endswith("/")),
                "files": dict(files[:RECORD_LIMIT]), "complete": len(files) <= RECORD_LIMIT,
                "rules": {e.rel: e.rule for e in self.entries if e.rel.endswith("/")}}


def list_project(root: Path, home: Path, in_git: bool) -> Listing:
    """The project's files and links to snapshot, and what was left out; UsageError for what cannot be taken."""
    rules = ignore_rules.always_rules()
    fray_ignore = root / ignore_rules.FRAY_IGNORE
    if fray_ignore.is_file():
        rules += ignore_rules.rules_from(fray_ignore.read_text(errors="replace"), ignore_rules.FRAY_IGNORE)
    ours = ignore_rules.Rules(rules)
    budget = [COUNT_LIMIT]
    left: list[Entry] = []
    home_rel = _inside(home, root)
    if in_git:
        names = _git_kept(root, ours, left, home_rel, budget)
    else:
        names = list(_walk(root, ours, left, home_rel, budget))
    listing = Listing({}, {}, LeftOut(left))
    prefix = f"{root}{os.sep}"
    for rel in names:
        path = prefix + rel
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue  # deleted but still in git's index: not part of the code now
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}; fix its permissions or leave it out "
                             "with .frayignore") from None
        if stat.S_ISLNK(st.st_mode):
            listing.links[rel] = _inside_link(root, rel)
        elif stat.S_ISREG(st.st_mode):
            if not os.access(path, os.R_OK):
                raise UsageError(f"cannot read {path}: permission denied; fix its permissions or leave it out "
                                 "with .frayignore")
            listing.files[rel] = st
    return listing


def _inside(home: Path, root: Path) -> str | None:
    if home == root or root in home.parents:
        rel = home.relative_to(root).as_posix()
        return None if rel in ("", ".") else rel
    return None


def _size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _file_entry(root: Path, rel: str, rule: str) -> Entry:
    size = _size(os.path.join(root, rel))
    return Entry(rel, rule, 1, size, True, ((rel, size),))


def _folder_entry(root: Path, rel: str, rule: str, budget: list[int]) -> Entry:
    """A folder left out whole, with the files it holds as far as `budget` (entries left to walk) allows."""
    if rule in (VENV_RULE, HOME_RULE):
        # Thousands of files nobody needs counted; FRAY_HOME's change with every run, and a spec must not.
        return Entry(rel + "/", rule, 0, 0, False, ((rel + "/", 0),))
    files = total = 0
    largest: list[tuple[int, str]] = []
    counted = True
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, rel)):
        budget[0] -= len(dirnames) + len(filenames)
        if budget[0] < 0:
            counted = False
            break
        for name in filenames:
            path = os.path.join(dirpath, name)
            size = _size(path)
            files += 1
            total += size
            largest.append((size, os.path.relpath(path, root).replace(os.sep, "/")))
        largest = sorted(largest, reverse=True)[:LARGEST_SHOWN]
    shown = tuple((path, size) for size, path in largest) or ((rel + "/", total),)  # an empty folder: itself
    return Entry(rel + "/", rule, files, total, counted, shown)


def _walk(root: Path, rules: ignore_rules.Rules, left: list[Entry], home_rel: str | None,
          budget: list[int]) -> Iterable[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        kept = []
        for name in sorted(dirnames):
            rel = posixpath.join(rel_dir, name)
            if os.path.islink(os.path.join(dirpath, name)):
                yield rel  # a link to a folder: checked (and kept as a link) like any link
                continue
            reason = _folder_reason(root, rel, rules, home_rel)
            if reason is None:
                kept.append(name)
            elif reason != ignore_rules.ALWAYS_SOURCE:
                left.append(_folder_entry(root, rel, reason, budget))
        dirnames[:] = kept
        for name in sorted(filenames):
            rel = posixpath.join(rel_dir, name)
            rule = rules.left_out_by(rel)
            if rule is None:
                yield rel
            elif rule.source != ignore_rules.ALWAYS_SOURCE:
                left.append(_file_entry(root, rel, _label(rule)))


def _label(rule: ignore_rules.Rule) -> str:
    return f"{rule.source} {rule.text}"


def _folder_reason(root: Path, rel: str, rules: ignore_rules.Rules, home_rel: str | None) -> str | None:
    """Why the folder `rel` is left out whole (a rule's label, VENV_RULE, HOME_RULE, ALWAYS_SOURCE), or None."""
    rule = rules.left_out_by(rel, True)
    if rule is not None:
        return ignore_rules.ALWAYS_SOURCE if rule.source == ignore_rules.ALWAYS_SOURCE else _label(rule)
    if rel == home_rel:
        return HOME_RULE
    if os.path.isfile(os.path.join(root, rel, VENV_MARKER)):
        return VENV_RULE
    return None


# ---------------------------------------------------------------- a git work tree


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    import subprocess  # only a git work tree runs git: a project outside git loads no subprocess

    done = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True, timeout=GIT_TIMEOUT_SEC)
    if done.returncode not in (0, 1) or (done.returncode == 1 and args[0] != "check-ignore"):
        raise UsageError(f"cannot list the git work tree {root}: {done.stderr.decode(errors='replace').strip()}; "
                         "name the folder to snapshot with --code DIR")
    return done.stdout


def _split(data: bytes) -> list[str]:
    return [name for name in data.decode("utf-8", errors="surrogateescape").split("\0") if name]


def _git_kept(root: Path, rules: ignore_rules.Rules, left: list[Entry], home_rel: str | None,
              budget: list[int]) -> list[str]:
    """What to take from a git work tree: git's files less what .frayignore leaves out, plus what git left out
    and .frayignore brings back; every other thing git left out, with git's rule, into `left`."""
    kept = set(_split(_git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")))
    skipped = _skipped_folders(kept, home_rel)
    names: list[str] = []
    for rel in sorted(kept):
        folder = next((f for f in skipped if rel.startswith(f + "/")), None)
        if folder is not None:
            continue
        rule = rules.left_out_by(rel)
        if rule is None:
            names.append(rel)
        elif rule.source != ignore_rules.ALWAYS_SOURCE:
            left.append(_file_entry(root, rel, _label(rule)))
    for folder in skipped:
        left.append(_folder_entry(root, folder, HOME_RULE if folder == home_rel else VENV_RULE, budget))
    ignored = _split(_git(root, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"))
    if not ignored:
        return names
    why = _git_rules(root, ignored)
    for entry in ignored:
        rel, is_dir = entry.rstrip("/"), entry.endswith("/")
        ours = rules.left_out_by(rel, is_dir)
        if ours is not None:  # .frayignore leaves it out too: its word is the last
            if ours.source != ignore_rules.ALWAYS_SOURCE:
                left.append(_folder_entry(root, rel, _label(ours), budget) if is_dir
                            else _file_entry(root, rel, _label(ours)))
            continue
        if rules.brought_back(rel, is_dir):
            names += _brought_back(root, rel, is_dir, rules)
            continue
        reason = why.get(entry) or why.get(rel)
        if reason is None and is_dir:
            continue  # a folder git lists for the ignored files it holds, which it lists too
        reason = reason or "git's excludes"
        if is_dir and rel == home_rel:
            reason = HOME_RULE
        elif is_dir and os.path.isfile(os.path.join(root, rel, VENV_MARKER)):
            reason = VENV_RULE
        left.append(_folder_entry(root, rel, reason, budget) if is_dir else _file_entry(root, rel, reason))
    return names


def _brought_back(root: Path, rel: str, is_dir: bool, rules: ignore_rules.Rules) -> list[str]:
    """The files of what git left out that a `!` line of .frayignore brings back."""
    if not is_dir:
        return [rel]
    found = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, rel)):
        base = os.path.relpath(dirpath, root).replace(os.sep, "/")
        dirnames[:] = [d for d in dirnames if rules.left_out_by(posixpath.join(base, d), True) is None]
        found += [posixpath.join(base, name) for name in filenames
                  if rules.left_out_by(posixpath.join(base, name)) is None]
    return found


def _git_rules(root: Path, ignored: list[str]) -> dict[str, str]:
    """Which exclude line left each path out: `.gitignore:3 *.bin` (git check-ignore -v)."""
    fields = _split(_git(root, "check-ignore", "-v", "-z", "--stdin", stdin=b"\0".join(p.encode() for p in ignored)))
    found = {}
    for source, line, pattern, path in zip(fields[0::4], fields[1::4], fields[2::4], fields[3::4]):
        found[path] = f"{os.path.relpath(source, root) if os.path.isabs(source) else source}:{line} {pattern}"
    return found


def _skipped_folders(names: Iterable[str], home_rel: str | None) -> list[str]:
    """Folders git keeps that are never code: FRAY_HOME itself, and virtual environments."""
    skipped = {posixpath.dirname(rel) for rel in names if posixpath.basename(rel) == VENV_MARKER}
    if home_rel is not None and any(rel.startswith(home_rel + "/") for rel in names):
        skipped.add(home_rel)
    return sorted(folder for folder in skipped if folder not in ("", "."))


def _inside_link(root: Path, rel: str) -> str:
    """A link's target, relative, when it stays inside the project; UsageError when it leaves it."""
    path = root / rel
    target = os.readlink(path)
    resolved = Path(os.path.normpath(path.parent / target))
    if resolved != root and root not in resolved.parents:
        raise UsageError(
            f"{path} is a link to {target}, outside the project {root}; a snapshot holds the project only. "
            "Copy what it points to into the project, leave the link out with .frayignore, or run in place "
            "with --code none")
    return os.path.relpath(resolved, path.parent).replace(os.sep, "/")
