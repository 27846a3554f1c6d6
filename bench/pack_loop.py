#!/usr/bin/env python3
"""A pack author's edit -> build -> run loop (issue 36, item 5).

    python3 bench/pack_loop.py [--callai target/release/callai] [--rounds 3]

For TypeScript and Python: `callai new` makes a pack in a scratch folder,
its build tools are installed offline (npm from the cache this
repository's build filled; the Python build venv this repository's build
made, with the SDK wheel `callai new` wrote), and it is built once with
an empty compile cache (the first build of all, which fills the function
cache). Then, per round, the pack's source is edited (a string in it
changes, so the component's bytes change), built (its build script ends
with `callai compile`), and run on its mock script; the times of the
build and of the run, and their sum, the loop. Then the same edit with
`--no-compile` and no function cache, the loop as it was before.

Wall-clock times on this machine, loopback only (the mock provider). Run
it from the repository after `cargo build --release` and a `cargo build`
(which builds the SDKs' tools). Prints a Markdown table.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(cmd, cwd, env, quiet=True):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=quiet, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{done.stdout}\n{done.stderr}")
    return done


def timed(cmd, cwd, env):
    start = time.monotonic()
    run(cmd, cwd, env)
    return time.monotonic() - start


def py_venv():
    venv = REPO / "target" / "guests" / "py-venv"
    if not (venv / "bin" / "componentize-py").exists():
        sys.exit(f"no {venv}: run `cargo build` first (it makes the Python build venv)")
    return venv


def setup(lang, callai, work, env):
    dir = work / f"my-{lang}-pack"
    run([callai, "new", "--lang", lang, dir], work, env)
    if lang == "ts":
        run(["npm", "ci", "--offline", "--no-audit", "--no-fund", "--loglevel=error"], dir, env)
        build = ["npm", "run", "--silent", "build"]
        source = dir / "src" / "index.ts"
    else:
        site = work / "site"
        wheel = next((dir / ".callai").glob("*.whl"))
        python = py_venv() / "bin" / "python"
        run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--target", site, wheel],
            dir, env)
        env["PYTHONPATH"] = str(site)
        env["PATH"] = f"{py_venv() / 'bin'}{os.pathsep}{env['PATH']}"
        build = [python, "-m", "callai_sdk.build", "build", "app.py", "-o", "pack.wasm"]
        source = dir / "app.py"
    return dir, build, source


def loop(lang, callai, rounds, precompile):
    with tempfile.TemporaryDirectory(prefix="pack-loop-") as work:
        work = Path(work)
        env = dict(os.environ, CALLAI=str(callai), CALLAI_CACHE_DIR=str(work / "cache"))
        dir, build, source = setup(lang, callai, work, env)
        if not precompile:
            # npm appends what follows `--` to the script: to callai-pack.
            build = build + (["--", "--no-compile"] if lang == "ts" else ["--no-compile"])
        first = timed(build, dir, env)
        text = source.read_text()
        builds, runs = [], []
        for i in range(rounds):
            edit = f'export const edit = "{i}";' if lang == "ts" else f'EDIT = "{i}"'
            source.write_text(f"{text}\n{edit}\n")
            if not precompile:
                # The loop before issue 36: every compile from nothing.
                shutil.rmtree(work / "cache", ignore_errors=True)
            builds.append(timed(build, dir, env))
            runs.append(timed([callai, "run", "pack.wasm", "--script", "mock.json",
                               "--input-file", "input.json"], dir, env))
        return first, statistics.median(builds), statistics.median(runs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--callai", default=str(REPO / "target" / "release" / "callai"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    callai = Path(args.callai).resolve()
    print("| pack | how | first build | build after an edit | first run after it | loop |")
    print("|---|---|---|---|---|---|")
    for lang in ["ts", "py"]:
        for precompile, how in [(False, "compiled by the run, no function cache"),
                                (True, "build ends with `callai compile`, function cache")]:
            first, build, runs = loop(lang, callai, args.rounds, precompile)
            print(f"| {lang} | {how} | {first:.1f} s | {build:.1f} s | {runs:.1f} s "
                  f"| {build + runs:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
