#!/usr/bin/env python3
"""What a tenant's budget costs: the host CPU of a call with a budget (its
worst case reserved in the run log's database before it is sent, its spend
charged when it settles) against the same call without one, on one SQLite
file; and the reservations per second two hosts make on one PostgreSQL.

    python3 bench/budget.py            # both
    python3 bench/budget.py --quick    # fewer calls

- sqlite: one `callai serve` (release build) with an SQLite run log and
  three tenants, `metered` (a budget of requests and tokens), `open` (none)
  and `money` (the same and a budget in money; through the provider only,
  as the built-in mock has no price). Rounds of CALLS
  `/v1/call` calls, 16 in flight, alternating the two tenants, three rounds
  each; the server's CPU per call from /proc. Twice: through the
  OpenAI-compatible provider to a loopback fake (a call as it is in front
  of a provider), and on the built-in mock (no HTTP: the least a call
  costs). The budget's share is (metered - open) / metered.
- postgres: a throwaway cluster (initdb; as root, as `postgres`). First
  the ledger alone: two processes (`reservations`, of crates/bench) of 16
  tasks each reserving one call's worst case and charging it, one database
  operation each, for SECONDS. Then two `callai serve` on one database,
  the `metered` tenant, 32 calls in flight per host for SECONDS (their
  allotments reserve a chunk of calls at a time), with each host's CPU per
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

TOKENS = {"metered": "tok-metered", "open": "tok-open", "money": "tok-money"}
REQUEST = {"messages": [{"role": "user", "content": "a scene"}], "maxTokens": 100,
           "retry": {"maxAttempts": 2}}
# On the built-in mock: a call with no HTTP to a provider, the least a call
# costs the host.
MOCK_BODY = json.dumps({"request": REQUEST,
                        "script": [{"content": "fine", "outputTokens": 40, "inputTokens": 10}]})
# Through the OpenAI-compatible provider to a loopback fake: a call as it
# is in front of a real provider.
FAKE_BODY = json.dumps({"request": dict(REQUEST, provider="fake")})


class Fake:
    """A loopback OpenAI-compatible provider (keep-alive), answering at once."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        answer = json.dumps({
            "id": "c", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 40},
        }).encode()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cpu(pid):
    tick = os.sysconf("SC_CLK_TCK")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


class Host:
    def __init__(self, config, name):
        env = dict(os.environ, METERED_TOKEN=TOKENS["metered"], OPEN_TOKEN=TOKENS["open"],
                   MONEY_TOKEN=TOKENS["money"], FAKE_KEY="sk-fake")
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


def config(dir, url, name, fake_port=1):
    path = dir / f"{name}.toml"
    path.write_text(f"""
[providers.fake]
kind = "openai"
baseUrl = "http://127.0.0.1:{fake_port}/v1"
apiKeyEnv = "FAKE_KEY"
model = "m"
prices = {{ input = 2.5, output = 10.0 }}
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
[tenants.money]
tokenEnv = "MONEY_TOKEN"
[tenants.money.budget]
requests = 1000000000000
outputTokens = 1000000000000000
cost = 1000000000
window = "1d"
""")
    return path


def caller(addr, tenant, calls, seconds=None, body=MOCK_BODY):
    """One connection's calls, kept alive; how many answered 200."""
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {"content-type": "application/json", "authorization": f"Bearer {TOKENS[tenant]}"}
    ok, n, end = 0, 0, (time.time() + seconds) if seconds else None
    while (end is None and n < calls) or (end is not None and time.time() < end):
        conn.request("POST", "/v1/call", body, headers)
        r = conn.getresponse()
        r.read()
        ok += r.status == 200
        n += 1
    conn.close()
    return ok, n


def load(addrs, tenant, calls, in_flight, seconds=None, body=MOCK_BODY):
    per = max(1, calls // in_flight)
    with ThreadPoolExecutor(in_flight * len(addrs)) as pool:
        jobs = [pool.submit(caller, a, tenant, per, seconds, body) for a in addrs for _ in range(in_flight)]
        results = [j.result() for j in jobs]
    ok = sum(r[0] for r in results)
    n = sum(r[1] for r in results)
    if ok != n:
        raise SystemExit(f"{n - ok} of {n} calls failed")
    return n


def sqlite(calls, rounds, body, tenants):
    dir = Path(tempfile.mkdtemp(prefix="callai-bench-budget-"))
    fake = Fake()
    host = Host(config(dir, dir / "runs.db", "sqlite", fake.port), "sqlite")
    try:
        for tenant in tenants:
            load([host.addr], tenant, 400, 16, body=body)  # warm up
        per = {t: [] for t in tenants}
        for _ in range(rounds):
            for tenant in tenants:
                before = cpu(host.proc.pid)
                n = load([host.addr], tenant, calls, 16, body=body)
                per[tenant].append(1e6 * (cpu(host.proc.pid) - before) / n)
    finally:
        host.stop()
        fake.server.shutdown()
    metered, open_ = statistics.median(per["metered"]), statistics.median(per["open"])
    money = statistics.median(per["money"]) if "money" in per else None
    return {"cpu_us_per_call": per, "metered_us": metered, "open_us": open_, "money_us": money,
            "budget_share": (metered - open_) / metered}


def ledger_alone(url, seconds):
    """Two processes (two hosts) of 16 tasks each, reserving and charging
    one call at a time in the ledger, with no allotment in between."""
    procs = [subprocess.Popen([str(TARGET / "release" / "reservations"), "--url", url,
                               "--writers", "16", "--seconds", str(seconds), "--tenant", "t"],
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [json.loads(p.communicate()[0]) for p in procs]
    return sum(o["per_s"] for o in outs)


def postgres(seconds):
    cluster = Cluster()
    dir = Path(tempfile.mkdtemp(prefix="callai-bench-budget-"))
    try:
        ledger_per_s = ledger_alone(cluster.database(), seconds)
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
    return {"calls": n, "seconds": took, "calls_per_second": n / took,
            "ledger_reservations_per_second": ledger_per_s,
            "cpu_us_per_call_per_host": [1e6 * s / (n / 2) for s in spent]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    args = parser.parse_args()
    calls, rounds, seconds = (2000, 2, 5) if args.quick else (10000, 5, 15)
    log("== building callai (release)")
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "callai-cli", "-p", "callai-bench",
                    "--bin", "callai", "--bin", "reservations"],
                   cwd=ROOT, check=True)
    WORK.mkdir(parents=True, exist_ok=True)
    results, lines = {}, [f"budgets, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores", ""]
    if args.only in (None, "sqlite"):
        lines += [
            "| SQLite, 16 in flight | without a budget | with a budget | the budget's share "
            "| with a budget in money too |",
            "|---|---|---|---|---|",
        ]
        # The built-in mock has no price: a budget in money refuses it.
        for name, body, tenants in [("provider", FAKE_BODY, list(TOKENS)),
                                    ("mock", MOCK_BODY, ["metered", "open"])]:
            log(f"== sqlite, {name}: a call with a budget against one without")
            s = results[f"sqlite-{name}"] = sqlite(calls, rounds, body, tenants)
            what = {"provider": "a call to a loopback OpenAI-compatible provider",
                    "mock": "a call to the built-in mock (no HTTP)"}[name]
            money = f"{s['money_us']:.0f} µs" if s["money_us"] else "—"
            lines.append(f"| {what} | {s['open_us']:.0f} µs | {s['metered_us']:.0f} µs | "
                         f"{100 * s['budget_share']:.1f}% | {money} |")
        lines.append("")
    if args.only in (None, "postgres"):
        log("== postgres: two hosts reserving on one database")
        p = results["postgres"] = postgres(seconds)
        lines += [
            "| PostgreSQL, two hosts | |",
            "|---|---|",
            f"| ledger reservations, each with its charge, per second (16 tasks per host) | {p['ledger_reservations_per_second']:.0f} |",
            f"| budgeted calls through `serve` per second (32 in flight per host, mock) | {p['calls_per_second']:.0f} |",
            f"| host CPU per budgeted call | {', '.join(f'{c:.0f} µs' for c in p['cpu_us_per_call_per_host'])} |",
        ]
    (WORK / "results.json").write_text(json.dumps(results, indent=2))
    report = "\n".join(lines)
    (WORK / "report.md").write_text(report + "\n")
    print(report)


if __name__ == "__main__":
    main()
