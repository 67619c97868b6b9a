"""The wrapper's hang options as a backend's wrapper command passes them (fray.backends.wrapper_command)."""

from __future__ import annotations

from pathlib import Path

from fray.backends import wrapper_command
from fray.backends.protocol import AttemptKey, SubmitRequest
from fray.core.model import RunSpec
from fray.wrapper import contract, options as wrapper_options


def test_the_wrapper_gets_the_idle_and_progress_timeouts_only_when_they_differ_from_its_defaults(tmp_path: Path):
    def parsed(spec: RunSpec) -> wrapper_options.Options:
        request = SubmitRequest(key=AttemptKey("20261126-000000-x-abcd", 1), name="x", spec=spec, home=tmp_path,
                                script=tmp_path / "s.py", attempt_dir=tmp_path / "a", checkpoint_dir=tmp_path / "c")
        argv = wrapper_command.wrapper_argv("python", request)
        return wrapper_options.parse(argv[argv.index("run"):])

    default = parsed(RunSpec())
    assert default.idle_timeout == contract.DEFAULT_IDLE_TIMEOUT_SEC and default.progress_timeout == 1800.0
    off = parsed(RunSpec(idle_timeout_sec=None, progress_timeout_sec=None))
    assert off.idle_timeout == 0 and off.progress_timeout == 0
    assert parsed(RunSpec(idle_timeout_sec=90.0)).idle_timeout == 90.0
