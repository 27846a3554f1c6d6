#!/usr/bin/env python3
"""Counts a heaptrack profile's allocations by the innermost frame of this
project's code that made them (or the library, where none of ours is on the
stack), per call:

    python3 bench/profile/allocations.py heaptrack.callai.zst CALLS

Needs `heaptrack_print` (Debian's `heaptrack`). Startup's allocations are
in the total; run enough calls that they do not matter."""

import collections
import re
import subprocess
import sys
import tempfile


def main():
    path, calls = sys.argv[1], int(sys.argv[2])
    with tempfile.NamedTemporaryFile("r", suffix=".folded") as folded:
        subprocess.run(["heaptrack_print", "-f", path, "--print-flamegraph", folded.name,
                        "--flamegraph-cost-type", "allocations"], capture_output=True, check=True)
        sites, total = collections.Counter(), 0
        for line in open(folded.name):
            stack, n = line.rstrip().rsplit(" ", 1)
            frames, n = stack.split(";"), int(n)
            total += n
            key = None
            for f in reversed(frames):
                m = re.search(r"(callai_\w+)::([\w:]+?)(?:::h[0-9a-f]{16}|$|::_\$u7b)", f)
                if m:
                    key = f"{m.group(1)}::{m.group(2)}"
                    break
            if key is None:
                lib = next((lib for lib in ["hyper_util", "reqwest", "hyper::", "axum", "tower", "tokio",
                                            "serde_json", "jsonschema", "wasmtime"]
                            if any(lib in f for f in frames)), "other")
                key = f"(no frame of ours) {lib.rstrip(':')}"
            sites[key] += n
    print(f"{total} allocations, {total / calls:.0f} per call")
    for key, n in sites.most_common(25):
        print(f"{n / calls:7.1f}  {key}")


if __name__ == "__main__":
    main()
