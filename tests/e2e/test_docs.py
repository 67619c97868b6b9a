"""The docs site: it builds with `mkdocs build --strict` (the console script and `python -m mkdocs`), its CLI
reference shows real defaults, its API reference names every public name, its front page reaches "When a run
fails" in one click, the README starts with the commands CI runs, and every shell and Python block of every page
runs as written (tests/docs_pages.py says how a page marks a block that another test runs, or none can).

Each page runs in its own scratch folder (a reader's checkout: a copy of examples/, and tests/fakes) and its
own FRAY_HOME, its blocks in
order, as a reader would type them: a titled block is written as that file, the others run with bash
(`-euo pipefail`) or Python, and each must exit 0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fray
from tests.conftest import SLURM_PAGE, _kill_everything_of
from tests.docs_pages import DOCS, REPO, RUNNABLE, blocks, pages

pytestmark = pytest.mark.slow

# Blocks no test can run here; each says why in its title. Keep this short.
MOST_NOT_RUN = 4
# A page whose blocks run on the real Slurm test cluster (tests/slurm) says so with SLURM_PAGE, a comment.


@pytest.mark.parametrize("how", ["python -m mkdocs", "the mkdocs script"])
def test_the_site_builds_strict(how: str, tmp_path: Path) -> None:
    mkdocs = [sys.executable, "-m", "mkdocs"] if how == "python -m mkdocs" else [str(_mkdocs_script(tmp_path))]
    proc = subprocess.run([*mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    for command in ("fray submit", "fray control config-set", "fray wait", "fray daemon start"):
        assert f'id="{command.replace(" ", "-")}"' in cli, command
    assert "Sentinel" not in cli  # click's "no default" marker, which mkdocs-click printed in every such cell
    assert re.search(r"<code>--port</code></td>\s*<td>integer[^<]*(?:<code>[^<]*</code>)?</td>\s*<td>[^<]*</td>\s*"
                     r"<td><code>8000</code></td>", cli, re.S), "fray web --port's default (8000) is not in its row"
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    for name in fray.__all__:
        if name != "__version__":
            assert f'id="fray.{name}"' in api, f"fray.{name} is exported but not in the API reference"


def _mkdocs_script(tmp_path: Path) -> Path:
    """The `mkdocs` console script beside the `fray` one, as pip installs them: this Python's own where the docs
    extra was installed into it (CI), else pip's same launcher written beside a copy of this Python's `fray` script."""
    installed = Path(sys.executable).parent / "mkdocs"
    if installed.exists():
        return installed
    scripts = tmp_path / "bin"
    scripts.mkdir()
    shutil.copy(Path(sys.executable).parent / "fray", scripts / "fray")
    script = scripts / "mkdocs"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom mkdocs.__main__ import cli\n"
                      "if __name__ == '__main__':\n    sys.exit(cli())\n")
    script.chmod(0o755)
    return script

def test_the_front_page_links_to_when_a_run_fails() -> None:
    front = (DOCS / "index.md").read_text()
    assert "(failures.md)" in front.split("\n## ", 1)[0]  # above the first section: seen at once
    assert (DOCS / "failures.md").read_text().startswith("# When a run fails")

def test_the_readme_says_what_fray_is_then_installs_it_alone_and_then_runs_the_tests_as_ci_does() -> None:
    readme = (REPO / "README.md").read_text()
    intro, first = readme.split("```bash\n", 1)
    assert intro.startswith("# fray\n\nfray is ") and "\n## " not in intro
    install, tests = first.split("```", 1)[0].splitlines()
    assert install.startswith("python3 -m pip install -e . && fray submit ")  # fray alone: no extra
    ci = (REPO / ".ci" / "run").read_text().split("echo \"== the README's test command\"\n", 1)[1]
    assert tests.endswith(" && " + ci.strip().splitlines()[0]), (tests, ci)

def test_every_shell_and_python_block_is_run_by_a_test_or_says_why_not() -> None:
    not_run = []
    for page in pages():
        text = (DOCS / page).read_text()
        hidden = re.findall(r"^[ \t]+```(?:bash|python|sh|shell|py|console)\b", text, re.M)
        assert not hidden, f"docs/{page}: an indented shell or Python block, which no test would find"
        for block in blocks(page):
            assert block.lang not in ("sh", "shell", "py", "console", "pycon"), \
                f"{block.where()}: write ```bash or ```python, which the tests run"
            if block.lang not in RUNNABLE:
                continue
            if block.not_run:
                not_run.append(block.where())
            if block.run_by:
                runner = (REPO / block.run_by).read_text()
                assert f'"{page}"' in runner and block.heading in runner, \
                    f"{block.where()} says {block.run_by} runs it, but that test does not read it"
    assert len(not_run) <= MOST_NOT_RUN, f"too many blocks no test runs: {not_run}"

@pytest.mark.parametrize("page", [p for p in pages() if any(b.lang in RUNNABLE and not b.run_by and not b.not_run
                                                               for b in blocks(p))])
def test_the_page_runs_as_written(page: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    scratch = tmp_path / "reader"
    shutil.copytree(REPO / "examples", scratch / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "tests" / "fakes", scratch / "tests" / "fakes",  # the TPU simulator a page puts on PATH
                    ignore=shutil.ignore_patterns("__pycache__"))
    home = tmp_path / "home"
    here = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # `fray` is this checkout's
    env = {**os.environ, "FRAY_HOME": str(home), "PATH": here,
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "FRAY_REMOTE": "", "COLUMNS": "200", "NO_COLOR": "1"}
    slurm = SLURM_PAGE in (DOCS / page).read_text()
    if slurm:
        env.update(_on_the_slurm_test_cluster(request, home, tmp_path))
    try:
        for block in blocks(page):
            if block.lang not in RUNNABLE or block.run_by or block.not_run:
                continue
            if block.is_file:
                path = scratch / block.title
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(block.text)
                if block.text.startswith("#!"):
                    path.chmod(0o755)
                continue
            command = ["bash", "-euo", "pipefail", "-c", block.text] if block.lang == "bash" \
                else [sys.executable, "-c", block.text]
            proc = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"{block.where()} exited {proc.returncode}:\n{block.text}\n" \
                                         f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    finally:
        subprocess.run(["fray", "daemon", "stop"], env=env, capture_output=True, timeout=60)
        _kill_everything_of(home)
        if slurm:
            request.getfixturevalue("slurm_cluster").run("scancel", "--name", ",".join(_slurm_jobs(home)), check=False)


def _on_the_slurm_test_cluster(request: pytest.FixtureRequest, home: Path, tmp_path: Path) -> dict[str, str]:
    """The real 4-node Slurm of tests/slurm, polled fast, its fake GPUs answered by the fake nvidia-smi."""
    from fray.state import store
    from fray.state.layout import Home
    from tests.backends.slurm.test_slurm_backend import FAKES, FAST

    cluster = request.getfixturevalue("slurm_cluster")
    store.ensure_home(Home(home))
    (home / "config.json").write_text(json.dumps({"slurm": FAST}))
    scenario = tmp_path / "gpus.json"
    scenario.write_text(json.dumps({"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-fake-{i}"}
                                             for i in range(4)]}))
    return {**cluster.env, "PATH": f"{FAKES}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "FAKE_NVIDIA_SMI_SCENARIO": str(scenario)}


def _slurm_jobs(home: Path) -> list[str]:
    """The Slurm job names of this home's attempts (`fray-<run id>-<attempt>`), to cancel what is left."""
    runs = home / "runs"
    return [f"fray-{run.name}-{n}" for run in runs.iterdir() for n in range(1, 4)] if runs.is_dir() else ["none"]
