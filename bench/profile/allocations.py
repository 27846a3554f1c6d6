#!/usr/bin/env python3
"""Counts a heaptrack profile's allocations by the innermost frame of this
project's code that made them (or the library, where none of ours is on the
stack), per call:

    python3 bench/profile/allocations.py heaptrack.callai.zst CALLS
    python3 bench/profile/allocations.py LONG.zst CALLS --minus SHORT.zst EXTRA

CALLS is every call the profiled process served (warm-up included); its
start-up's allocations are in the total. With `--minus`, the steady state
too: (LONG's total - SHORT's total) / EXTRA, where LONG served EXTRA more
calls than SHORT (bench/profile/allocations.sh does both runs). Needs
`heaptrack_print` (Debian's `heaptrack`)."""

import collections
import re
import subprocess
import sys
import tempfile


def sites_of(path):
    """Allocations by site, and their total."""
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
    return sites, total


def main():
    path, calls = sys.argv[1], int(sys.argv[2])
    sites, total = sites_of(path)
    if "--minus" in sys.argv:
        i = sys.argv.index("--minus")
        short, extra = sys.argv[i + 1], int(sys.argv[i + 2])
        _, short_total = sites_of(short)
        print(f"steady state: {(total - short_total) / extra:.0f} allocations per call "
              f"({total} - {short_total} over {extra} calls)")
    print(f"{total} allocations, {total / calls:.0f} per call made (start-up included)")
    for key, n in sites.most_common(25):
        print(f"{n / calls:7.1f}  {key}")


if __name__ == "__main__":
    main()
