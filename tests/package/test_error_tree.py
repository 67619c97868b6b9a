"""One error tree: every error fray raises on purpose is a FrayError with an exit code, listed in fray.errors'
docstring; what `import fray` exports as an error is in the tree (RemoteTraceback aside, as documented)."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import pytest

import fray
from fray import errors
from fray.errors import FrayError, failure_message


# Exceptions fray defines outside the tree, and why no person meets them as fray's error.
OUTSIDE_THE_TREE = {
    "fray.errors.RemoteTraceback": "the text of a job's or an actor's own traceback (errors.py says so)",
    "fray.core.validation.SchemaCompileError": "fray's own schema uses a keyword its compiler lacks: a bug in fray",
    "fray.daemon.sinks.SinkError": "stays in the daemon: the notification outbox logs it and tries again",
    "fray.actors.wire.FrameError": "caught by the actor client, whose calls fail with ActorConnectionError saying it",
    # The wrapper is standard-library only: it cannot derive from FrayError (errors.py says so of Superseded).
    "fray.wrapper.fence.Superseded": "raised in a job whose attempt was replaced (`report.Superseded`)",
    "fray.wrapper.code.CodeError": "caught by the wrapper, which records why the attempt could not start",
    "fray.wrapper.workload.LaunchError": "caught by the wrapper, which records why the attempt could not start",
    "fray.wrapper.tfevents.CorruptRecord": "caught by the TensorBoard reader, which stops reading that file",
    "fray.wrapper.probes.cuda_smoke.Unusable": "caught by the CUDA smoke test, which tries the next framework",
}


def _import_every_module() -> None:
    import fray.wrapper  # its own folder (wrapper/), not under fray's: walked apart

    for path, prefix in ((fray.__path__, "fray."), (fray.wrapper.__path__, "fray.wrapper.")):
        for module in pkgutil.walk_packages(path, prefix):
            if not module.name.endswith(".__main__"):  # those run a program when imported
                importlib.import_module(module.name)


def _every_fray_error() -> set[type[FrayError]]:
    _import_every_module()
    found, todo = set(), [FrayError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("fray.") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_fray_error_is_listed_in_the_tree_with_its_exit_code() -> None:
    listed = errors.__doc__
    for error in _every_fray_error() | {FrayError}:
        assert f" {error.__name__} " in listed, f"{error.__module__}.{error.__name__} is not in fray.errors' tree"
        assert isinstance(error.exit_code, int) and error.exit_code > 0


def test_every_exported_error_is_in_the_tree() -> None:
    exported = [getattr(fray, name) for name in fray.__all__ if name != "__version__"]
    exceptions = [member for member in exported if isinstance(member, type) and issubclass(member, BaseException)]
    assert {e.__name__ for e in exceptions} >= {"ClusterError", "JobFailed", "ActorConnectionError", "RemoteActorError"}
    assert {name for name in fray.__all__ if name.endswith("Error")} <= {e.__name__ for e in exceptions}
    for exception in exceptions:
        if exception is fray.RemoteTraceback:  # listed among the errors that are not fray's, and why
            assert "`RemoteTraceback`" in errors.__doc__
            continue
        assert issubclass(exception, FrayError), exception
        assert f" {exception.__name__} " in errors.__doc__, exception
        assert isinstance(exception.exit_code, int) and exception.exit_code > 0


def test_every_exception_fray_defines_is_a_fray_error_or_said_otherwise() -> None:
    _import_every_module()
    outside = set()
    for name, module in list(sys.modules.items()):
        if name == "fray" or name.startswith("fray."):
            outside |= {f"{name}.{key}" for key, value in vars(module).items()
                        if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == name
                        and not issubclass(value, FrayError)}
    assert outside == set(OUTSIDE_THE_TREE)


@pytest.mark.parametrize("raised", [
    lambda: fray.ActorConnectionError("no actor at 10.0.0.1:9 answered"),
    lambda: fray.RemoteActorError("KeyError", "'weights'"),
])
def test_an_actor_error_is_caught_as_a_fray_error_and_as_what_it_was(raised) -> None:
    error = raised()
    with pytest.raises(FrayError):
        raise error
    if isinstance(error, fray.ActorConnectionError):
        with pytest.raises(ConnectionError):  # what callers caught before the tree took it in
            raise error
    text, exit_code = failure_message(error)
    assert text.startswith("fray: error: ") and exit_code == 2

