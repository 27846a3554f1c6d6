"""Write callAI pack nodes in Python: a request builder, results with
attempt accounting (RFC 0248), a per-node budget, tool calls and a tool
loop, and ``@node``. Built into
a WebAssembly component with ``callai-pack-py build app.py -o app.wasm``."""

from .budget import DEFAULT_MAX_TOKENS, Budget, Spent
from .call import CallAccounting, Structured, call, call_accounting, call_as, call_json
from .errors import BudgetError, CallError, NodeError, RetryError
from .node import log, node, raw_node
from .request import MAX_ATTEMPTS, Image, Request, Retry, Tool, ToolCall
from .response import Attempts, Response
from .tools import LoopAnswer, LoopError, LoopRecord, ToolLoop, arguments_as

__all__ = [
    "Attempts",
    "Budget",
    "BudgetError",
    "CallAccounting",
    "CallError",
    "LoopAnswer",
    "LoopError",
    "LoopRecord",
    "DEFAULT_MAX_TOKENS",
    "Image",
    "MAX_ATTEMPTS",
    "NodeError",
    "Request",
    "Response",
    "Retry",
    "RetryError",
    "Spent",
    "Structured",
    "Tool",
    "ToolCall",
    "ToolLoop",
    "arguments_as",
    "call",
    "call_accounting",
    "call_as",
    "call_json",
    "log",
    "node",
    "raw_node",
]
