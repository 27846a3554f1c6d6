#!/usr/bin/env python3
"""The peer benchmark: callAI's host against Pydantic AI and the Vercel AI
SDK, side by side in one run, on a loopback fake OpenAI-compatible
provider that answers valid JSON after 20 ms.

    python3 bench/peers/run.py            # everything (about 10 minutes)
    python3 bench/peers/run.py --quick    # fewer calls, a smoke run

What it measures, each contender in a process of its own:
  1. structured calls, CALLS of them with CONCURRENCY in flight:
     Pydantic AI, the Vercel AI SDK, our host embedded in a small Rust
     program (through a sandboxed pack, and through the engine alone), and
     `callai serve` (HTTP in and out; `/v1/call` and a pack run through
     `/v1/runs`). CPU is the contender's own process, calls only (the load
     generator and the fake provider run elsewhere); peak memory is its
     peak resident set.
  2. `callai serve` runs/s and latency p50/p99 at 1, 100 and 1000
     concurrent clients, against one `callai run` process per node;
  3. `callai serve` memory per in-flight run: 1000 runs waiting on a
     provider that answers after 2 s.

Needs: cargo, python3 (venv), node + npm. Installs the peers from the
pinned lists beside this file into the cargo target directory (never into
the repository). Network: 127.0.0.1 only, besides the package registries.
Prints a Markdown report and writes it, with the raw JSON, under
<target>/bench-peers/.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
WORK = TARGET / "bench-peers"
RELEASE = TARGET / "release"

REQUEST = {
    "messages": [{"role": "user", "content": "Write one sentence of a scene."}],
    "maxTokens": 200,
    "responseSchema": {
        "type": "object",
        "properties": {"scene": {"type": "string"}},
        "required": ["scene"],
    },
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    log("$", " ".join(str(c) for c in cmd))
    return subprocess.run(cmd, check=True, **kw)


def json_out(cmd, **kw):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)
    return json.loads(out.stdout.strip().splitlines()[-1])


def setup():
    sh(["cargo", "build", "--release", "--locked", "-p", "callai-bench", "-p", "callai-cli"], cwd=ROOT)
    WORK.mkdir(parents=True, exist_ok=True)
    venv = WORK / "venv"
    stamp = venv / "installed.txt"
    wanted = (HERE / "requirements.txt").read_text()
    if not stamp.exists() or stamp.read_text() != wanted:
        sh([sys.executable, "-m", "venv", str(venv)])
        sh([str(venv / "bin" / "pip"), "install", "-q", "-r", str(HERE / "requirements.txt")])
        stamp.write_text(wanted)
    js = WORK / "vercel"
    js.mkdir(exist_ok=True)
    for f in ["package.json", "package-lock.json", "calls.mjs"]:
        shutil.copy(HERE / "vercel" / f, js / f)
    lock = (js / "package-lock.json").read_text()
    jstamp = js / "node_modules" / ".callai-lock"
    if not jstamp.exists() or jstamp.read_text() != lock:
        sh(["npm", "ci", "--silent", "--ignore-scripts"], cwd=js)
        jstamp.write_text(lock)
    return venv / "bin" / "python", js / "calls.mjs"


class Proc:
    """A background process that prints `listening on http://ADDR` on stderr."""

    def __init__(self, cmd, env=None):
        log("$", " ".join(str(c) for c in cmd), "&")
        self.p = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                  text=True, env=env)
        line = self.p.stderr.readline()
        if not line.startswith("listening on "):
            raise SystemExit(f"{cmd[0]} did not start: {line}{self.p.stderr.read()}")
        self.url = line.split()[-1]
        threading.Thread(target=lambda: self.p.stderr.read(), daemon=True).start()

    @property
    def pid(self):
        return str(self.p.pid)

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=60)


def cpu_s(pid):
    """CPU seconds of every live thread of `pid` (schedstat: nanoseconds)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            pass
    return total / 1e9


def status_kib(pid, field):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def serve(fake_url, extra=""):
    config = WORK / f"serve-{abs(hash(fake_url + extra))}.toml"
    config.write_text(
        f'[defaults]\nprovider = "openai"\n[providers.openai]\nbaseUrl = "{fake_url}/v1"\n'
        f'apiKeyEnv = ""\nmodel = "fake-model"\n[server]\nmaxQueuedRuns = 100000\n{extra}'
    )
    env = dict(os.environ, CALLAI_CACHE_DIR=str(WORK / "cache"))
    cmd = [str(RELEASE / "callai"), "serve", "--listen", "127.0.0.1:0", "--config", str(config)]
    return Proc(cmd, env), config


def load(url, path, body, calls, concurrency, watch=None):
    cmd = [str(RELEASE / "load"), "--url", url + path, "--body", json.dumps(body),
           "--calls", str(calls), "--concurrency", str(concurrency)]
    if watch:
        cmd += ["--watch-pid", watch]
    return json_out(cmd)


def measured_serve(server, path, body, calls, concurrency):
    load(server.url, path, body, 20, 20)  # warm up: compile, connections
    c0 = cpu_s(server.pid)
    r = load(server.url, path, body, calls, concurrency)
    r["cpu_s"] = cpu_s(server.pid) - c0
    r["cpu_ms_per_call"] = r["cpu_s"] * 1000 / calls
    r["peak_rss_mib"] = status_kib(server.pid, "VmHWM") / 1024
    return r


def per_process(config, calls, concurrency):
    """One `callai run` process per node; CPU and peak memory of each
    process from its own rusage."""
    env = dict(os.environ, CALLAI_CACHE_DIR=str(WORK / "cache"))
    cmd = [str(RELEASE / "callai"), "run", "echo-attempts", "--config", str(config),
           "--input", json.dumps(REQUEST)]
    subprocess.run(cmd, check=True, capture_output=True, env=env)  # warm the cache

    def one(_):
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        ok = p.returncode == 0 and b'"error"' not in out
        return time.perf_counter() - t, ok, usage.ru_utime + usage.ru_stime, usage.ru_maxrss

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        done = list(pool.map(one, range(calls)))
    wall = time.perf_counter() - t0
    lat = sorted(d[0] for d in done)
    pick = lambda p: lat[min(len(lat) - 1, round(p / 100 * (len(lat) - 1)))] * 1000
    return {
        "calls": calls, "concurrency": concurrency,
        "failures": sum(not d[1] for d in done), "wall_s": wall,
        "per_s": calls / wall, "p50_ms": pick(50), "p99_ms": pick(99),
        "cpu_ms_per_call": sum(d[2] for d in done) * 1000 / calls,
        "peak_rss_mib": max(d[3] for d in done) / 1024,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    calls, conc = (200, 200) if a.quick else (1000, 200)
    python, vercel = setup()
    results = {"calls": calls, "concurrency": conc, "machine": os.uname().release,
               "cores": os.cpu_count()}
    fake = Proc([str(RELEASE / "fake-openai"), "--delay-ms", "20"])
    base = fake.url + "/v1"
    try:
        peers = {}
        peers["Pydantic AI"] = json_out([str(python), str(HERE / "pydantic_ai_calls.py"),
                                         "--url", base, "--calls", str(calls), "--concurrency", str(conc)])
        peers["Vercel AI SDK"] = json_out(["node", str(vercel), "--url", base,
                                           "--calls", str(calls), "--concurrency", str(conc)])
        for mode in ["pack", "engine"]:
            peers[f"callai embedded ({mode})"] = json_out(
                [str(RELEASE / "embedded"), "--url", base, "--mode", mode,
                 "--calls", str(calls), "--concurrency", str(conc)])
        server, config = serve(fake.url)
        try:
            peers["callai serve /v1/call"] = measured_serve(
                server, "/v1/call", {"request": REQUEST}, calls, conc)
            peers["callai serve /v1/runs (pack)"] = measured_serve(
                server, "/v1/runs", {"pack": "echo-attempts", "input": REQUEST}, calls, conc)
            scaling = {}
            for clients in [1, 100, 1000]:
                n = {1: 100, 100: 2000, 1000: 5000}[clients]
                if a.quick:
                    n = max(clients, n // 10)
                scaling[clients] = load(server.url, "/v1/runs",
                                        {"pack": "echo-attempts", "input": REQUEST}, n, clients)
            results["serve_scaling"] = scaling
        finally:
            server.stop()
        results["per_process"] = {
            clients: per_process(config, n, clients)
            for clients, n in ([(1, 20), (100, 200)] if not a.quick else [(1, 5), (100, 100)])
        }
        results["peers"] = peers
    finally:
        fake.stop()

    # Memory per in-flight run: 1000 runs all waiting 2 s on the provider.
    slow = Proc([str(RELEASE / "fake-openai"), "--delay-ms", "2000"])
    try:
        server, _ = serve(slow.url, "[limits]\nmaxConcurrentRuns = 1000\n")
        try:
            body = {"pack": "echo-attempts", "input": REQUEST}
            load(server.url, "/v1/runs", body, 2, 2)
            idle = status_kib(server.pid, "VmRSS")
            r = load(server.url, "/v1/runs", body, 1000, 1000, watch=server.pid)
            results["in_flight"] = {
                "runs": 1000, "idle_rss_mib": idle / 1024,
                "peak_rss_mib": r["watched_peak_rss_kib"] / 1024,
                "kib_per_run": (r["watched_peak_rss_kib"] - idle) / 1000,
                "wall_s": r["wall_s"], "failures": r["failures"],
            }
        finally:
            server.stop()
    finally:
        slow.stop()

    report = render(results)
    print(report)
    (WORK / "results.json").write_text(json.dumps(results, indent=2))
    (WORK / "report.md").write_text(report)
    log(f"written: {WORK / 'report.md'}, {WORK / 'results.json'}")


def render(r):
    peers = r["peers"]
    fastest = min(v["cpu_ms_per_call"] for k, v in peers.items() if not k.startswith("callai"))
    lines = [
        f"{r['calls']} structured calls, {r['concurrency']} in flight, fake provider answering after 20 ms "
        f"({r['cores']} cores):",
        "",
        "| contender | wall s | CPU ms/call | vs fastest peer | peak RSS MiB | failures |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, v in peers.items():
        lines.append(
            f"| {name} | {v['wall_s']:.2f} | {v['cpu_ms_per_call']:.3f} | "
            f"{v['cpu_ms_per_call'] / fastest:.3f}x | {v['peak_rss_mib']:.0f} | {v['failures']} |"
        )
    lines += ["", "`callai serve` pack runs (`/v1/runs`) by concurrent clients, against one `callai run` process per node:", "",
              "| clients | serve runs/s | p50 ms | p99 ms | process-per-node runs/s | p50 ms | p99 ms |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    for clients, s in r["serve_scaling"].items():
        p = r["per_process"].get(clients) or r["per_process"].get(str(clients))
        pp = (f"{p['per_s']:.1f} | {p['p50_ms']:.0f} | {p['p99_ms']:.0f}" if p else "not run | | ")
        lines.append(f"| {clients} | {s['per_s']:.0f} | {s['p50_ms']:.1f} | {s['p99_ms']:.1f} | {pp} |")
    m = r["in_flight"]
    lines += ["", f"Memory per in-flight run: {m['kib_per_run']:.1f} KiB "
              f"({m['runs']} runs waiting on the provider: {m['idle_rss_mib']:.0f} MiB idle, "
              f"{m['peak_rss_mib']:.0f} MiB peak; {m['failures']} failures)."]
    pp = r["per_process"]
    one = pp.get(100) or pp.get("100")
    if one:
        lines.append(f"One `callai run` process per node spent {one['cpu_ms_per_call']:.1f} ms CPU per run "
                     f"and peaked at {one['peak_rss_mib']:.0f} MiB per process.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
