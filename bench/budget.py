#!/usr/bin/env python3
"""What a tenant's budget costs: the host CPU of a call with a budget (its
worst case reserved in the run log's database before it is sent, its spend
charged when it settles) against the same call without one, on one SQLite
file; and the reservations per second two hosts make on one PostgreSQL.

    python3 bench/budget.py            # both
    python3 bench/budget.py --quick    # fewer calls

- sqlite: one `callai serve` (release build) with an SQLite run log and two
  tenants, `metered` (a budget) and `open` (none). Rounds of CALLS
  `/v1/call` calls on the built-in mock (no latency), 16 in flight,
  alternating the two tenants, three rounds each; the server's CPU per call
  from /proc. The budget's share is (metered - open) / metered.
- postgres: a throwaway cluster (initdb; as root, as `postgres`), two
  `callai serve` on one database, the `metered` tenant, 32 calls in flight
  per host for SECONDS: each call is one reservation and one charge, so
  calls per second is reservations per second; with each host's CPU per
  call.

Network: 127.0.0.1 only. Prints a Markdown report; writes it, and the raw
figures as JSON, under <target>/bench-budget/.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
WORK = TARGET / "bench-budget"
sys.path.insert(0, str(HERE / "runlog"))
from run import Cluster  # noqa: E402  (the run-log benchmark's throwaway cluster)

TOKENS = {"metered": "tok-metered", "open": "tok-open"}
BODY = json.dumps({
    "request": {"messages": [{"role": "user", "content": "a scene"}], "maxTokens": 100,
                "retry": {"maxAttempts": 2}},
    "script": [{"content": "fine", "outputTokens": 40, "inputTokens": 10}],
})


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cpu(pid):
    tick = os.sysconf("SC_CLK_TCK")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


class Host:
    def __init__(self, config, name):
        env = dict(os.environ, METERED_TOKEN=TOKENS["metered"], OPEN_TOKEN=TOKENS["open"])
        self.proc = subprocess.Popen(
            [str(TARGET / "release" / "callai"), "serve", "--listen", "127.0.0.1:0", "--config", str(config)],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        first = self.proc.stderr.readline().strip()
        if not first.startswith("listening on http://"):
            raise SystemExit(f"{name}: {first}")
        self.addr = first.removeprefix("listening on http://")
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def config(dir, url, name):
    path = dir / f"{name}.toml"
    path.write_text(f"""
[runlog]
url = "{url}"
[tenants.metered]
tokenEnv = "METERED_TOKEN"
[tenants.metered.budget]
requests = 1000000000000
outputTokens = 1000000000000000
window = "1d"
[tenants.open]
tokenEnv = "OPEN_TOKEN"
""")
    return path


def caller(addr, tenant, calls, seconds=None):
    """One connection's calls, kept alive; how many answered 200."""
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {"content-type": "application/json", "authorization": f"Bearer {TOKENS[tenant]}"}
    ok, n, end = 0, 0, (time.time() + seconds) if seconds else None
    while (end is None and n < calls) or (end is not None and time.time() < end):
        conn.request("POST", "/v1/call", BODY, headers)
        r = conn.getresponse()
        r.read()
        ok += r.status == 200
        n += 1
    conn.close()
    return ok, n


def load(addrs, tenant, calls, in_flight, seconds=None):
    per = max(1, calls // in_flight)
    with ThreadPoolExecutor(in_flight * len(addrs)) as pool:
        jobs = [pool.submit(caller, a, tenant, per, seconds) for a in addrs for _ in range(in_flight)]
        results = [j.result() for j in jobs]
    ok = sum(r[0] for r in results)
    n = sum(r[1] for r in results)
    if ok != n:
        raise SystemExit(f"{n - ok} of {n} calls failed")
    return n


def sqlite(calls, rounds):
    dir = Path(tempfile.mkdtemp(prefix="callai-bench-budget-"))
    host = Host(config(dir, dir / "runs.db", "sqlite"), "sqlite")
    try:
        for tenant in TOKENS:
            load([host.addr], tenant, 400, 16)  # warm up
        per = {t: [] for t in TOKENS}
        for _ in range(rounds):
            for tenant in TOKENS:
                before = cpu(host.proc.pid)
                n = load([host.addr], tenant, calls, 16)
                per[tenant].append(1e6 * (cpu(host.proc.pid) - before) / n)
    finally:
        host.stop()
    metered, open_ = statistics.median(per["metered"]), statistics.median(per["open"])
    return {"cpu_us_per_call": per, "metered_us": metered, "open_us": open_,
            "budget_share": (metered - open_) / metered}


def postgres(seconds):
    cluster = Cluster()
    dir = Path(tempfile.mkdtemp(prefix="callai-bench-budget-"))
    try:
        url = cluster.database()
        path = config(dir, url, "postgres")
        hosts = [Host(path, "pg-a"), Host(path, "pg-b")]
        try:
            load([h.addr for h in hosts], "metered", 200, 8)  # warm up
            before = [cpu(h.proc.pid) for h in hosts]
            started = time.time()
            n = load([h.addr for h in hosts], "metered", 0, 32, seconds)
            took = time.time() - started
            spent = [cpu(h.proc.pid) - b for h, b in zip(hosts, before)]
        finally:
            for h in hosts:
                h.stop()
    finally:
        cluster.stop()
    return {"calls": n, "seconds": took, "reservations_per_second": n / took,
            "cpu_us_per_call_per_host": [1e6 * s / (n / 2) for s in spent]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    args = parser.parse_args()
    calls, rounds, seconds = (2000, 2, 5) if args.quick else (10000, 3, 15)
    log("== building callai (release)")
    subprocess.run(["cargo", "build", "--release", "--locked", "--bin", "callai"], cwd=ROOT, check=True)
    WORK.mkdir(parents=True, exist_ok=True)
    results, lines = {}, [f"budgets, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores", ""]
    if args.only in (None, "sqlite"):
        log("== sqlite: a call with a budget against one without")
        s = results["sqlite"] = sqlite(calls, rounds)
        lines += [
            "| SQLite, 16 in flight | host CPU per call |",
            "|---|---|",
            f"| without a budget | {s['open_us']:.0f} µs |",
            f"| with a budget (reserve + charge) | {s['metered_us']:.0f} µs |",
            f"| the budget's share | {100 * s['budget_share']:.1f}% |",
            "",
        ]
    if args.only in (None, "postgres"):
        log("== postgres: two hosts reserving on one database")
        p = results["postgres"] = postgres(seconds)
        lines += [
            "| PostgreSQL, two hosts, 32 in flight each | |",
            "|---|---|",
            f"| reservations (and charges) per second | {p['reservations_per_second']:.0f} |",
            f"| host CPU per call | {', '.join(f'{c:.0f} µs' for c in p['cpu_us_per_call_per_host'])} |",
        ]
    (WORK / "results.json").write_text(json.dumps(results, indent=2))
    report = "\n".join(lines)
    (WORK / "report.md").write_text(report + "\n")
    print(report)


if __name__ == "__main__":
    main()
