#!/usr/bin/env python3
"""What keeping call traces in a run log costs `callai serve` per call: two
servers side by side, one without a run log and one with an SQLite run log
(both without the log line), the same `/v1/call` text calls at 50 in
flight, alternating in rounds so that drift on a shared machine falls on
both; CPU per call over each server's threads (schedstat).

    python3 bench/runlog/trace_cost.py [--rounds 6] [--calls 4000]

Needs the release `callai` and `callai-bench` binaries (`cargo build
--release -p callai-cli -p callai-bench`). Network: 127.0.0.1 only.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
RELEASE = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release"
BODY = json.dumps({"request": {"messages": [{"role": "user", "content": "Write one sentence."}],
                               "maxTokens": 200}})


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def serve(work, name, fake_port, extra):
    port = free_port()
    config = work / f"{name}.toml"
    config.write_text(f'[providers.fake]\nkind = "openai"\nbaseUrl = "http://127.0.0.1:{fake_port}/v1"\n'
                      f'apiKeyEnv = "FAKE_KEY"\nmodel = "fake"\n[defaults]\nprovider = "fake"\n'
                      f'[limits]\nmaxConcurrentRuns = 1000\n[log]\nformat = "off"\n{extra}')
    proc = subprocess.Popen([str(RELEASE / "callai"), "serve", "--config", str(config),
                             "--listen", f"127.0.0.1:{port}"],
                            env={**os.environ, "FAKE_KEY": "sk-fake"}, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{name} did not start")


def cpu_ns(pid):
    return sum(int((task / "schedstat").read_text().split()[0])
               for task in Path(f"/proc/{pid}/task").iterdir())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=4000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        fake_port = free_port()
        fake = subprocess.Popen([str(RELEASE / "fake-openai"), "--port", str(fake_port), "--delay-ms", "20"],
                                stderr=subprocess.DEVNULL)
        servers = {"no run log": serve(work, "plain", fake_port, ""),
                   "SQLite run log": serve(work, "runlog", fake_port,
                                           f'[runlog]\nurl = "{work / "runs.db"}"\n')}
        per_call = {name: [] for name in servers}
        try:
            for _ in range(args.rounds):
                for name, (proc, port) in servers.items():
                    before = cpu_ns(proc.pid)
                    subprocess.run([str(RELEASE / "load"), "--url", f"http://127.0.0.1:{port}/v1/call",
                                    "--body", BODY, "--calls", str(args.calls), "--concurrency", "50"],
                                   check=True, capture_output=True)
                    per_call[name].append((cpu_ns(proc.pid) - before) / args.calls / 1000)
        finally:
            for proc, _ in servers.values():
                proc.terminate()
            fake.terminate()
    print("| | CPU µs per call, each round | median |\n|---|---|---:|")
    for name, values in per_call.items():
        print(f"| {name} | {', '.join(f'{v:.0f}' for v in values)} | {statistics.median(values):.0f} |")
    ratio = statistics.median(per_call["SQLite run log"]) / statistics.median(per_call["no run log"])
    print(f"\nwith ÷ without (medians): {ratio:.2f}×")


if __name__ == "__main__":
    main()
