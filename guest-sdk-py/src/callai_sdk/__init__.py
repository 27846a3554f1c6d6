"""Write callAI pack nodes in Python: a request builder, results with
attempt accounting (RFC 0248), a per-node budget, and ``@node``. Built into
a WebAssembly component with ``callai-pack-py build app.py -o app.wasm``."""

from .budget import DEFAULT_MAX_TOKENS, Budget, Spent
from .call import CallAccounting, Structured, call, call_accounting, call_as, call_json
from .errors import BudgetError, CallError, NodeError, RetryError
from .node import log, node, raw_node
from .request import MAX_ATTEMPTS, Request, Retry
from .response import Attempts, Response

__all__ = [
    "Attempts",
    "Budget",
    "BudgetError",
    "CallAccounting",
    "CallError",
    "DEFAULT_MAX_TOKENS",
    "MAX_ATTEMPTS",
    "NodeError",
    "Request",
    "Response",
    "Retry",
    "RetryError",
    "Spent",
    "Structured",
    "call",
    "call_accounting",
    "call_as",
    "call_json",
    "log",
    "node",
    "raw_node",
]
