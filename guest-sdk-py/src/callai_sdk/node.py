"""A pack node, its export, and its log.

Decorate the node's function with ``@node`` (JSON in, JSON out) or
``@raw_node`` (text in, text out); ``callai-pack-py build`` exports it as
the component's ``run``."""

from __future__ import annotations

import json
import traceback
from pathlib import PurePath
from typing import Any, Callable

from .bindings import Err, wit_log
from .call import dumps
from .errors import NodeError

_NODE: tuple[str, Callable[..., Any]] | None = None


def node(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The pack's node: it takes the host's JSON input, parsed, and returns
    a JSON value. What it raises fails the run with the error's message."""
    global _NODE
    _NODE = ("json", fn)
    return fn


def raw_node(fn: Callable[[str], str]) -> Callable[[str], str]:
    """A node that takes and returns JSON text as it is."""
    global _NODE
    _NODE = ("raw", fn)
    return fn


def _run(text: str) -> str:
    if _NODE is None:
        raise NodeError("the pack defines no node (decorate a function with @node)")
    kind, fn = _NODE
    if kind == "raw":
        return fn(text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise NodeError(f"the node's input is not what it takes: {e}") from None
    return dumps(fn(value))


def _failure(e: Exception) -> str:
    """The run's error for what the node raised: a ``NodeError``'s message
    as it is (the pack chose it); anything else with its type and where it
    was raised, innermost first (file, line, function of the last three
    frames), so that a ``KeyError`` says more than its key."""
    if isinstance(e, NodeError):
        return str(e)
    frames = traceback.extract_tb(e.__traceback__)[-3:]
    where = ", ".join(
        f"{PurePath(f.filename).name}:{f.lineno} in {f.name}" for f in reversed(frames)
    )
    return f"{type(e).__name__}: {e} (raised at {where})"


class WitWorld:
    """The component's export; componentize-py looks for this class."""

    def run(self, input: str) -> str:
        try:
            return _run(input)
        except Exception as e:  # every failure of the node fails its run
            if not isinstance(e, NodeError):
                # The whole traceback, with the run's events (pack.log).
                trace = "".join(traceback.format_exception(e)).rstrip()
                wit_log.log(wit_log.Level.ERROR, trace)
            raise Err(_failure(e)) from None


class _Log:
    """Diagnostics the host collects with the run's events (``pack.log``)."""

    @staticmethod
    def _log(level: str, message: str) -> None:
        wit_log.log(wit_log.Level[level], message)

    def debug(self, message: str) -> None:
        self._log("DEBUG", message)

    def info(self, message: str) -> None:
        self._log("INFO", message)

    def warn(self, message: str) -> None:
        self._log("WARN", message)

    def error(self, message: str) -> None:
        self._log("ERROR", message)


log = _Log()
