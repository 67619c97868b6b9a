"""The docs' pages as tests read them: their fenced blocks, and which of them each test runs.

A shell (`bash`) or Python (`python`) block of a page under `docs/` is one of:

- a file, when its fence has a title (```` ```python title="train.py" ````, shown above the block):
  the page's later commands use it, so it is written under that name before they run;
- a command or a script, run as written, in order, by `tests/e2e/test_docs.py` (one page, one scratch
  folder and one FRAY_HOME);
- run by another test, which needs what a page cannot make alone (the real Slurm test cluster,
  two sshd), when an HTML comment `<!-- run by tests/test_x.py -->` stands on the line above it;
  that test reads the block from the page (`block_under`);
- not run at all, when its title starts with "Not run" and says why (the reader sees it).

Other languages (`text` for output, `json`, `toml`) are shown, never run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
RUNNABLE = ("bash", "python")
NOT_RUN = "Not run"
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
RUN_BY = re.compile(r"<!-- run by (tests/\S+\.py) -->\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to docs/, e.g. "pipelines.md"
    line: int  # of the opening fence, 1-based
    lang: str
    title: str | None
    run_by: str | None  # the test file that runs it, when not tests/e2e/test_docs.py
    heading: str  # the closest heading above it, without its #s
    text: str

    @property
    def is_file(self) -> bool:
        return self.title is not None and not self.title.startswith(NOT_RUN)

    @property
    def not_run(self) -> bool:
        return self.title is not None and self.title.startswith(NOT_RUN)

    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def pages() -> list[str]:
    return sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))


def blocks(page: str) -> list[Block]:
    text = (DOCS / page).read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[:match.start()]
        info = match.group("info").strip()
        lang = info.split(" ", 1)[0] if info else ""
        title = re.search(r'title="([^"]*)"', info)
        previous = before.rstrip("\n").rsplit("\n", 1)[-1]
        run_by = RUN_BY.search(previous)
        headings = re.findall(r"^#+ (.+)$", FENCE.sub("", before), re.M)  # not a `# comment` in a block
        found.append(Block(page=page, line=before.count("\n") + 1, lang=lang, title=title and title.group(1),
                           run_by=run_by and run_by.group(1), heading=headings[-1] if headings else "",
                           text=match.group("body")))
    return found


def block_under(page: str, heading: str, lang: str = "bash") -> Block:
    """The first `lang` block under `heading` of a page: what a test that runs it reads."""
    for block in blocks(page):
        if block.heading == heading and block.lang == lang:
            return block
    raise AssertionError(f"docs/{page} has no {lang} block under '{heading}'")
