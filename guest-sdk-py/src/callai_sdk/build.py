"""``callai-pack-py build app.py -o app.wasm``: builds a pack written in
Python into a WebAssembly component of the ``openwop:callai/pack-node``
world with componentize-py (pinned in requirements-build.txt). Last,
``callai compile`` (the ``callai`` on PATH, or ``$CALLAI``) fills the
compiled-component cache, so the first ``callai run`` after a build does
not compile; ``--no-compile`` skips it."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SDK = Path(__file__).resolve().parent
WIT = SDK / "wit"

ENTRY = """\
import {module}  # registers the node
from callai_sdk.node import WitWorld
"""


def build(app: Path, out: Path, componentize: str = "componentize-py") -> None:
    # componentize-py imports the pack to pre-initialise it, and its own
    # interpreter writes __pycache__ beside every module it imports (it does
    # not read PYTHONDONTWRITEBYTECODE). So the pack's folder and the SDK are
    # copied into a scratch folder first: a build never writes into the
    # source tree.
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")
    with tempfile.TemporaryDirectory(prefix="callai-pack-py-") as work:
        entry, pack, sdk = Path(work, "entry"), Path(work, "pack"), Path(work, "sdk")
        entry.mkdir()
        (entry / "callai_pack_entry.py").write_text(ENTRY.format(module=app.stem))
        shutil.copytree(app.parent, pack, ignore=skip)
        shutil.copytree(SDK, sdk / SDK.name, ignore=skip)
        command = [
            componentize, "-d", str(WIT), "-w", "pack-node", "componentize", "callai_pack_entry",
            "-p", str(entry), "-p", str(pack), "-p", str(sdk), "-o", str(out),
        ]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(prog="callai-pack-py")
    parser.add_argument("command", choices=["build"])
    parser.add_argument("app", type=Path, help="the pack's module, e.g. app.py")
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--no-compile", action="store_true",
                        help="leave the compile to the first callai run")
    args = parser.parse_args()
    tool = shutil.which("componentize-py") or str(Path(sys.executable).parent / "componentize-py")
    build(args.app.resolve(), args.out.resolve(), tool)
    print(f"callai-pack-py: {args.out} ({args.out.stat().st_size} bytes)", file=sys.stderr)
    if not args.no_compile:
        precompile(args.out.resolve())


def precompile(wasm: Path) -> None:
    """``callai compile WASM``, so that the first run loads the pack instead
    of compiling it; without a ``callai`` to run, the first run compiles."""
    callai = os.environ.get("CALLAI") or "callai"
    try:
        done = subprocess.run([callai, "compile", str(wasm)], check=False)
    except FileNotFoundError:
        print(f"callai-pack-py: no `{callai}` to run (set CALLAI to its path): "
              "the first `callai run` compiles the pack", file=sys.stderr)
        return
    if done.returncode != 0:
        print(f"callai-pack-py: `{callai} compile {wasm}` failed", file=sys.stderr)
        sys.exit(done.returncode)


if __name__ == "__main__":
    main()
