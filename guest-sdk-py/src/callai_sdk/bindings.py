"""The generated bindings, which exist only inside a component build
(componentize-py makes ``wit_world`` and bundles the modules the pack
imports when it is built, so they are imported here, at the top). Outside a
build, importing the SDK still works; calling the host does not."""

from __future__ import annotations

try:
    from componentize_py_types import Err
    from wit_world.imports import ai
    from wit_world.imports import log as wit_log
except ImportError:  # not inside a component build

    class _Outside:
        def __getattr__(self, name: str):
            raise RuntimeError("the callai host is only reachable from a pack built with callai-pack-py")

    class Err(Exception):  # type: ignore[no-redef]
        value: object

    ai = wit_log = _Outside()  # type: ignore[assignment]

__all__ = ["Err", "ai", "wit_log"]
