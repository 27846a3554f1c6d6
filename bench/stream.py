#!/usr/bin/env python3
"""What a streamed answer costs `callai serve` (issue 31, items 8 and 9).

    python3 bench/stream.py            # three rounds of each
    python3 bench/stream.py --quick    # one round, 1 MB only, 10 unread streams

CPU: a loopback fake (`callai-bench`'s `fake-stream`) streams 1, 2 and
4 MB of text as server-sent events of 100 bytes, with a space every eight
bytes and without any (base64-like characters, as a model emitting an
encoded blob), and the same text as one event; a client reads it all
through `/v1/chat/completions` with `"stream": true`. Per case, the CPU
the serve process spent on the answer (from each thread's schedstat), the
CPU per piece, and, per shape of text, the 4 MB figure over the 1 MB one
(linear: 4).

Memory: 50 clients ask for a streamed 4 MB answer, read its head, and then
read nothing (receive buffers of 4 KiB); the serve process's resident
memory once they have stalled, over its memory before, per unread stream.
The write timeout is set past the measurement, so nothing is cut.

Network: 127.0.0.1 only. Prints a Markdown report; writes the figures to
<target>/bench-stream/report.json.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
RELEASE = TARGET / "release"
WORK = TARGET / "bench-stream"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(name, argv, env=None):
    """Starts `argv`; waits for the `listening on http://ADDR` line it
    prints; the process and its port."""
    logf = WORK / f"{name}.log"
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(logf, "w"),
                            env={**os.environ, **(env or {})})
    for _ in range(300):
        text = logf.read_text()
        if "listening on http://" in text:
            return proc, int(text.split("listening on http://", 1)[1].split()[0].rsplit(":", 1)[1])
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited: see {logf}")
        time.sleep(0.1)
    raise SystemExit(f"{name} did not start")


def start_fake(size, piece, space):
    args = [str(RELEASE / "fake-stream"), "--bytes", str(size), "--piece", str(piece)]
    if not space:
        args.append("--no-space")
    return spawn(f"fake-{size}-{piece}-{space}", args)


def start_serve(fake_port, write_timeout_ms=30000):
    cfg = WORK / f"serve-{fake_port}.toml"
    cfg.write_text(
        f'[server]\nwriteTimeoutMs = {write_timeout_ms}\n'
        f'[limits]\nmaxResponseBytes = 8388608\nmaxProviderBodyBytes = 67108864\n'
        f'[providers.fake]\nkind = "openai"\nbaseUrl = "http://127.0.0.1:{fake_port}/v1"\n'
        f'apiKeyEnv = "FAKE_KEY"\nmodel = "fake"\n')
    port = free_port()
    proc, _ = spawn(f"serve-{fake_port}", [str(RELEASE / "callai"), "serve", "--config", str(cfg),
                                            "--listen", f"127.0.0.1:{port}"],
                    env={"FAKE_KEY": "sk-bench-stream-0248"})
    return proc, port


def request(port, streamed):
    body = json.dumps({"model": "fake", "stream": streamed, "max_tokens": 64000,
                       "messages": [{"role": "user", "content": "write"}]}).encode()
    return (f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
            f"connection: close\r\n\r\n").encode() + body


def threads_ns(pid):
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[task.name] = int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def read_all(port):
    """One streamed answer, read to its end; its size in bytes."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(request(port, True))
        total = 0
        while chunk := s.recv(1 << 16):
            total += len(chunk)
    return total


def cpu_of_answer(pid, port):
    """The serve process's CPU (s) over one streamed answer, to the
    nanosecond from each thread's schedstat (its threads live through it)."""
    before = threads_ns(pid)
    size = read_all(port)
    after = threads_ns(pid)
    return sum(ns - before.get(t, 0) for t, ns in after.items()) / 1e9, size


def rss_kib(pid):
    return int(Path(f"/proc/{pid}/status").read_text().split("VmRSS:")[1].split()[0])


def cpu_cases(sizes, rounds):
    results = []
    for space in (True, False):
        for size in sizes:
            for piece in (100, 0):
                fake, fake_port = start_fake(size, piece, space)
                serve, port = start_serve(fake_port)
                try:
                    read_all(port)  # warm: connections, caches
                    spent = [cpu_of_answer(serve.pid, port)[0] for _ in range(rounds)]
                finally:
                    serve.terminate()
                    fake.terminate()
                    serve.wait(timeout=30)
                    fake.wait(timeout=30)
                pieces = size // 100 if piece else 1
                cpu = statistics.median(spent)
                results.append({"space": space, "bytes": size, "piece": piece or size,
                                "pieces": pieces, "cpu_ms": 1e3 * cpu,
                                "cpu_us_per_piece": 1e6 * cpu / pieces})
                log(results[-1])
    return results


def unread_memory(streams):
    fake, fake_port = start_fake(4 << 20, 100, True)
    serve, port = start_serve(fake_port, write_timeout_ms=600000)
    sockets = []
    try:
        read_all(port)
        time.sleep(1)
        idle = rss_kib(serve.pid)
        for _ in range(streams):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            s.sendall(request(port, True))
            head = b""
            while b"\r\n\r\n" not in head:
                head += s.recv(1)
            sockets.append(s)
        time.sleep(5)
        stalled = rss_kib(serve.pid)
    finally:
        for s in sockets:
            s.close()
        serve.terminate()
        fake.terminate()
        serve.wait(timeout=30)
        fake.wait(timeout=30)
    return {"streams": streams, "idle_kib": idle, "stalled_kib": stalled,
            "kib_per_stream": (stalled - idle) / streams}


def report(cases, memory, rounds):
    print(f"CPU of `callai serve` per streamed answer (median of {rounds}):\n")
    print("| text | size | pieces | CPU | CPU per piece |")
    print("|---|---|---|---|---|")
    for c in cases:
        shape = "words" if c["space"] else "no whitespace"
        pieces = f"{c['pieces']:,} of 100 B" if c["piece"] == 100 else "one"
        print(f"| {shape} | {c['bytes'] >> 20} MB | {pieces} | {c['cpu_ms']:.1f} ms "
              f"| {c['cpu_us_per_piece']:.2f} µs |")
    print()
    for space in (True, False):
        by_size = {c["bytes"]: c["cpu_ms"] for c in cases if c["space"] == space and c["piece"] == 100}
        if 1 << 20 in by_size and 4 << 20 in by_size:
            shape = "words" if space else "no whitespace"
            print(f"- {shape}, 100-byte pieces: 4 MB costs {by_size[4 << 20] / by_size[1 << 20]:.2f}x "
                  f"the CPU of 1 MB (linear: 4)")
    print(f"\nUnread streams: {memory['streams']} clients that read nothing of a 4 MB stream: "
          f"{memory['idle_kib'] / 1024:.1f} MB resident before, {memory['stalled_kib'] / 1024:.1f} MB "
          f"with them, {memory['kib_per_stream']:.0f} KiB per unread stream.")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "callai-cli",
                    "-p", "callai-bench", "--bin", "callai", "--bin", "fake-stream"], cwd=ROOT, check=True)
    rounds = 1 if args.quick else 3
    sizes = [1 << 20] if args.quick else [1 << 20, 2 << 20, 4 << 20]
    cases = cpu_cases(sizes, rounds)
    memory = unread_memory(10 if args.quick else 50)
    (WORK / "report.json").write_text(json.dumps({"cases": cases, "memory": memory}, indent=2))
    report(cases, memory, rounds)


if __name__ == "__main__":
    main()
