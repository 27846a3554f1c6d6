#!/usr/bin/env python3
"""Splits a `perf record` profile's self time into what it was spent on:
the kernel, malloc/free, serde_json, hyper, tokio, this project's crates...

    python3 bench/profile/categories.py perf.data
    python3 bench/profile/categories.py perf.data --calls 6000

With `--calls` (the calls made while it recorded), each category's CPU
µs per call as well: one sample stands for 1/F seconds of one thread's
CPU (F, perf's sampling frequency, read from the recording), so two
profiles of the same load (`serve.sh` and `FLOOR=1 serve.sh`) can be set
side by side and their difference read category by category.

The categories are regular expressions over symbol names (the first that
matches wins); a build with symbols (`cargo build --profile release-debug`)
is needed for names. Prints one line per category, largest first."""

import collections
import re
import subprocess
import sys

RULES = [
    ("malloc/free", r"malloc|free|_int_|unlink_chunk|__rdl_|__rust_alloc|__rust_dealloc|realloc|tcache|arena"),
    ("memcpy/memcmp", r"mem(move|cpy|cmp|set)|__memcmp|strlen"),
    ("serde_json", r"serde_json|serde_core|serde::"),
    ("jsonschema", r"jsonschema|referencing"),
    ("wasmtime/cranelift (host side)", r"wasmtime|cranelift|wasmparser"),
    ("wasm (the guest's own code)", r"^wasm\[|jit|0x7f"),
    ("hyper/http/httparse", r"hyper::|httparse|http::|h2::|http_body"),
    ("reqwest/hyper_util/url", r"reqwest|hyper_util|hyper_rustls|idna|url::|percent_encoding"),
    ("axum/tower", r"axum|tower|matchit"),
    ("tokio/mio/futures", r"tokio|mio::|futures|parking_lot|std::sync|crossbeam"),
    ("callai engine/wire", r"callai_engine|callai_wire"),
    ("callai host", r"callai_host"),
    ("callai server", r"callai_server"),
    ("callai providers", r"callai_providers"),
    ("core/alloc/std/fmt", r"core::|alloc::|std::|fmt"),
    ("libc, other", r"libc|syscall|epoll|clock_gettime|vdso|pthread|writev|recv|send|__GI"),
]


def sample_frequency(path):
    """perf's `-F` for the recording at `path` (`perf evlist -F`)."""
    listing = subprocess.run(["perf", "evlist", "-F", "-i", path], capture_output=True, text=True,
                             check=True).stdout
    m = re.search(r"sample_freq=(\d+)", listing)
    if not m:
        sys.exit(f"{path}: no sampling frequency in `perf evlist -F`: {listing.strip()!r}")
    return int(m[1])


def main():
    args = sys.argv[1:]
    path = args[0]
    calls = int(args[args.index("--calls") + 1]) if "--calls" in args else None
    report = subprocess.run(["perf", "report", "-i", path, "--no-children", "--sort", "dso,sym", "-n",
                             "-g", "none", "--percent-limit", "0"], capture_output=True, text=True,
                            check=True).stdout
    samples = collections.Counter()
    for line in report.splitlines():
        m = re.match(r"\s*[\d.]+%\s+(\d+)\s+(\S+)\s+\[(.)\]\s+(.*)", line)
        if not m:
            continue
        count, dso, kind, sym = int(m[1]), m[2], m[3], m[4]
        key = "kernel" if kind == "k" or "kernel" in dso else None
        for name, rx in RULES:
            if key:
                break
            if re.search(rx, sym):
                key = name
        if not key and "libc" in dso:
            key = "libc, other"
        samples[key or "other"] += count
    total = sum(samples.values())
    per_call = None
    if calls:
        hz = sample_frequency(path)
        per_call = lambda n: n * 1e6 / hz / calls  # noqa: E731
    for name, count in samples.most_common():
        share = 100.0 * count / total
        if per_call:
            print(f"{share:6.1f}%  {per_call(count):7.1f} µs/call  {name}")
        else:
            print(f"{share:6.1f}%  {name}")
    if per_call:
        print(f"{100.0:6.1f}%  {per_call(total):7.1f} µs/call  all")


if __name__ == "__main__":
    main()
