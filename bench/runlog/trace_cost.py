#!/usr/bin/env python3
"""What keeping call traces costs `callai serve` per call: two servers side
by side (both without the log line), the same `/v1/call`s at 50 in flight,
alternating in rounds so that drift on a shared machine falls on both; CPU
per call over each server's process tree, measured as `bench/floor.py`
measures a stage (whose fake provider, servers and load it uses). Each
server first takes `--warm` calls, so that its store of traces is full and
every call evicts one, as on a server that has run a while.

    python3 bench/runlog/trace_cost.py [--rounds 6] [--calls 4000] [--warm 11000]
        [--what runlog|memory] [--kind text|structured] [--binary PATH]

`--what runlog` (the default): without a run log against with an SQLite
one. `--what memory`: no trace kept (`[server] keepCalls = 0`) against
traces kept in memory (the default 10,000), issue 35's "traces on within
1.1x of off".

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
    ap.add_argument("--warm", type=int, default=11000)
    ap.add_argument("--what", choices=["runlog", "memory"], default="runlog")
    ap.add_argument("--kind", choices=["text", "structured"], default="text")
    ap.add_argument("--binary", type=Path, default=floor.RELEASE / "callai",
                    help="the callai to measure (another build's, say)")
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
        if args.what == "runlog":
            pair = [("no run log", NO_LOG_LINE),
                    ("SQLite run log", f'{NO_LOG_LINE}[runlog]\nurl = "{runlog}"\n')]
        else:
            pair = [("no traces kept", f"{NO_LOG_LINE}[server]\nkeepCalls = 0\n"),
                    ("traces kept in memory", NO_LOG_LINE)]
        for name, toml in pair:
            proc, port = floor.start_serve(f"trace-cost-{len(contenders)}", args.binary,
                                           fake_port, toml=toml)
            procs.append(proc)
            contenders[name] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", floor.call_body, {})
        for contender in contenders.values():
            if args.warm:
                floor.stage(contender, args.kind, 50, args.warm)
        per_call = {name: [] for name in contenders}
        for n in range(args.rounds):
            # Alternate which goes first: neither always follows the other.
            order = list(contenders.items())
            for name, contender in order if n % 2 == 0 else reversed(order):
                per_call[name].append(floor.stage(contender, args.kind, 50, args.calls)["cpu_us"])
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()
    print(f"{args.kind} /v1/call, 50 in flight, {args.calls} calls a round\n")
    print("| | CPU µs per call, each round | median |\n|---|---|---:|")
    for name, values in per_call.items():
        print(f"| {name} | {', '.join(f'{v:.0f}' for v in values)} | {statistics.median(values):.0f} |")
    without, with_ = (per_call[name] for name, _ in pair)
    ratio = statistics.median(with_) / statistics.median(without)
    paired = [w / o for w, o in zip(with_, without)]
    print(f"\nwith ÷ without (medians): {ratio:.2f}×; round by round: "
          f"{', '.join(f'{r:.2f}' for r in paired)} (median {statistics.median(paired):.2f}×)")


if __name__ == "__main__":
    main()
