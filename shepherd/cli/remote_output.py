"""`fray COMMAND --remote HOST` in the CLI: the remote answers in JSON, this machine renders it.

A command whose answer is one JSON document (list, status, logs, control,
nodes, ...) runs on the host with `--json`, and its document is rendered here
by the very renderer a local run uses: human output is identical to local, and
fits this terminal rather than the remote's. Under `--json`, for streams
(`--wait`, `--follow`) and screens (`tui`), and for anything not in the table
below, the remote's own output is passed through byte for byte
(fray.remote.forward). A remote error document becomes `fray: error: ...` here,
with the remote's exit code.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable

import orjson

from fray.cli import failures, output
from fray.core.command_line import JSON_FLAG, own_words, with_json
from fray.remote import forward

# command path -> "module:renderer"; the longest matching path wins, None means "pass through"
RENDERERS: dict[tuple[str, ...], str | None] = {
    ("submit",): "fray.cli.submit_wait:render_submitted",
    ("list",): "fray.cli.list_cmd:render_list",
    ("status",): "fray.cli.status_cmd:render_status",
    ("logs",): "fray.cli.logs_cmd:render_logs",
    ("control",): "fray.cli.control_cmd:render_control",
    ("daemon",): "fray.cli.daemon_cmd:render_daemon",
    ("daemon", "run"): None,  # the daemon in the foreground: a stream of its own
    ("nodes",): "fray.cli.nodes_cmd:render_nodes",
    ("nodes", "list"): "fray.cli.nodes_cmd:render_nodes",
    ("nodes", "ban"): "fray.cli.nodes_cmd:render_change",
    ("nodes", "unban"): "fray.cli.nodes_cmd:render_change",
    ("actors",): "fray.cli.actors_cmd:render_actors",
    ("partitions",): "fray.cli.partitions_cmd:render_partitions",
    ("tpus",): "fray.cli.tpus_cmd:render_tpus",
    ("usage",): "fray.cli.usage_cmd:render_usage",
    ("audit", "verify"): "fray.cli.audit_cmd:render_verify",
    ("audit", "show"): "fray.cli.audit_cmd:render_show",
}
# A group that lists when run bare takes --json only on its listing subcommand (`fray nodes` = `fray nodes list`).
DEFAULT_SUBCOMMANDS: dict[str, str] = {"nodes": "list"}
STREAMING_FLAGS = frozenset({"--wait", "--follow", "-f", "--help", "-h"})


def renderer_for(argv: list[str]) -> Callable[[dict[str, Any]], Any] | None:
    """The local renderer of this command's JSON answer, or None to pass the remote's output through."""
    before_args = own_words(argv)
    if STREAMING_FLAGS & set(before_args) or JSON_FLAG in before_args:
        return None
    words = tuple(forward.command_words(argv))
    if forward.interactive(list(words), argv):
        return None
    if words[:1] == ("logs",) and not sys.stdout.isatty():
        return None  # to a pipe or file: the remote's bytes, exactly as the workload wrote them
    for length in (2, 1):
        if words[:length] in RENDERERS and len(words) >= length:
            target = RENDERERS[words[:length]]
            if target is None:
                return None
            module, _, name = target.partition(":")
            return getattr(importlib.import_module(module), name)
    return None


def explicit(argv: list[str]) -> list[str]:
    """`argv` naming the subcommand a bare group runs (`nodes` -> `nodes list`), so `--json` reaches it."""
    words = forward.command_words(argv)
    if len(words) != 1 or words[0] not in DEFAULT_SUBCOMMANDS:
        return argv
    at = argv.index(words[0]) + 1
    return [*argv[:at], DEFAULT_SUBCOMMANDS[words[0]], *argv[at:]]


def run(host: str, argv: list[str]) -> int:
    """Run `fray *argv` on `host`; its exit code.

    A failure of the link itself (down, refused, dropped) is a RemoteError with what to do (exit 255),
    never a traceback; a reader that went away, or Ctrl-C (130), ends the command quietly, as a local one does.
    """
    try:
        return _run(host, argv)
    except BrokenPipeError:  # `fray status --remote H RUN | head`
        return output.reader_gone()
    except KeyboardInterrupt:  # Ctrl-C in a relayed stream (`fray logs -f --remote H RUN | grep x`): as locally
        return 130
    except Exception as exc:
        from fray.remote.errors import from_transport

        failure = from_transport(exc, host)
        if failure is None:
            raise
        raise failure from None


def _run(host: str, argv: list[str]) -> int:
    render = renderer_for(argv)
    if render is None:
        return forward.run(host, argv)
    result = forward.answer(host, with_json(explicit(argv)))
    try:
        data = orjson.loads(result.stdout)
    except orjson.JSONDecodeError:  # not one document (a crash, an old remote): show what it said
        sys.stdout.buffer.write(result.stdout)
        sys.stdout.flush()
        data = None
    sys.stderr.buffer.write(result.stderr)  # notes about the output, never part of it
    sys.stderr.flush()
    if isinstance(data, dict) and set(data) == {"error"}:
        print(failures.PREFIX + str(data["error"].get("message", "")), file=sys.stderr)
    elif isinstance(data, dict):
        for text in render(data):
            output.line(text)
    return result.exit_code
