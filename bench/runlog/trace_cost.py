#!/usr/bin/env python3
"""What keeping call traces in a run log costs `callai serve` per call: two
servers side by side, one without a run log and one with an SQLite run log
(both without the log line), the same text `/v1/call`s at 50 in flight,
alternating in rounds so that drift on a shared machine falls on both; CPU
per call over each server's process tree, measured as `bench/floor.py`
measures a stage (whose fake provider, servers and load it uses).

    python3 bench/runlog/trace_cost.py [--rounds 6] [--calls 4000]

Needs the release `callai` and `callai-bench` binaries (`cargo build
--release -p callai-cli -p callai-bench`). Network: 127.0.0.1 only.
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import floor  # noqa: E402  (the fake, the servers, a stage's CPU per call)

NO_LOG_LINE = '[log]\nformat = "off"\n'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=4000)
    args = ap.parse_args()
    floor.WORK.mkdir(parents=True, exist_ok=True)
    runlog = floor.WORK / "trace-cost.db"
    for f in floor.WORK.glob("trace-cost.db*"):
        f.unlink()
    procs = []
    try:
        fake, fake_port = floor.start_fake()
        procs.append(fake)
        contenders = {}
        for name, toml in [("no run log", NO_LOG_LINE),
                           ("SQLite run log", f'{NO_LOG_LINE}[runlog]\nurl = "{runlog}"\n')]:
            proc, port = floor.start_serve(f"trace-cost-{len(contenders)}", floor.RELEASE / "callai",
                                           fake_port, toml=toml)
            procs.append(proc)
            contenders[name] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", floor.call_body, {})
        per_call = {name: [] for name in contenders}
        for _ in range(args.rounds):
            for name, contender in contenders.items():
                per_call[name].append(floor.stage(contender, "text", 50, args.calls)["cpu_us"])
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()
    print("| | CPU µs per call, each round | median |\n|---|---|---:|")
    for name, values in per_call.items():
        print(f"| {name} | {', '.join(f'{v:.0f}' for v in values)} | {statistics.median(values):.0f} |")
    ratio = statistics.median(per_call["SQLite run log"]) / statistics.median(per_call["no run log"])
    print(f"\nwith ÷ without (medians): {ratio:.2f}×")


if __name__ == "__main__":
    main()
