#!/usr/bin/env python3
"""Splits a `perf record` profile's self time into what it was spent on:
the kernel, malloc/free, serde_json, hyper, tokio, this project's crates...

    python3 bench/profile/categories.py perf.data

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


def main():
    report = subprocess.run(["perf", "report", "-i", sys.argv[1], "--no-children", "--sort", "dso,sym",
                             "-g", "none", "--percent-limit", "0"], capture_output=True, text=True,
                            check=True).stdout
    shares = collections.Counter()
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)", line)
        if not m:
            continue
        pct, dso, kind, sym = float(m[1]), m[2], m[3], m[4]
        key = "kernel" if kind == "k" or "kernel" in dso else None
        for name, rx in RULES:
            if key:
                break
            if re.search(rx, sym):
                key = name
        if not key and "libc" in dso:
            key = "libc, other"
        shares[key or "other"] += pct
    for name, pct in shares.most_common():
        print(f"{pct:6.1f}%  {name}")


if __name__ == "__main__":
    main()
