#!/usr/bin/env python3
"""Context switches per call, and CPU per call, of `callai serve`'s
/v1/call beside the hyper pass-through floor (and, with --baseline, another
build's serve), side by side in interleaved rounds: a structured call to
the loopback fake (answering after 20 ms) at 1, 50 and 200 in flight.

    python3 bench/profile/switches.py [--baseline BIN] [--rounds 3] [--calls 2000]
        [--profile release-debug]

A switch is a thread of the process going off its core, counted from
/proc/PID/task/*/status (voluntary and not), so the count repeats where CPU
seconds do not: on this machine's shared cores it is what one call in
flight costs beyond its work, each switch a wake-up of a sleeping thread.
The last round's switches are also given by thread name (`tokio-rt-worker`,
`callai-log`). Uses the binaries (`callai`, `passthrough`, `load`,
`fake-openai`) of the cargo profile `--profile` (release, as
`bench/floor.py` builds them, by default) in CARGO_TARGET_DIR (or
target/). Network: 127.0.0.1 only.
"""
import argparse
import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
RELEASE = TARGET / "release"
SCHEMA = {"type": "object", "properties": {"scene": {"type": "string"}}, "required": ["scene"]}
MESSAGES = [{"role": "user", "content": "Write one sentence of a scene."}]
CALL = {"request": {"messages": MESSAGES, "maxTokens": 200, "responseSchema": SCHEMA}}
CHAT = {"model": "fake", "max_tokens": 200, "messages": MESSAGES,
        "response_format": {"type": "json_schema", "json_schema": {"name": "scene", "schema": SCHEMA}}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def up(url):
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer")


def serve(binary, fake_port, work, name):
    port = free_port()
    config = work / f"{name}.toml"
    config.write_text(f'[providers.fake]\nkind = "openai"\nbaseUrl = "http://127.0.0.1:{fake_port}/v1"\n'
                      'apiKeyEnv = "FAKE_KEY"\nmodel = "fake"\n[defaults]\nprovider = "fake"\n'
                      '[limits]\nmaxConcurrentRuns = 1000\n')
    proc = subprocess.Popen([str(binary), "serve", "--config", str(config), "--listen", f"127.0.0.1:{port}"],
                            env={**os.environ, "FAKE_KEY": "sk-fake"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    up(f"http://127.0.0.1:{port}/healthz")
    return proc, f"http://127.0.0.1:{port}/v1/call", CALL


def floor(fake_port):
    port = free_port()
    proc = subprocess.Popen([str(RELEASE / "passthrough"), "--upstream", f"http://127.0.0.1:{fake_port}",
                             "--port", str(port)], stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return proc, f"http://127.0.0.1:{port}/v1/chat/completions", CHAT


def counts(pid):
    """CPU ns and switches over the process's threads, and switches by thread name."""
    cpu, by_name = 0, {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            cpu += int((task / "schedstat").read_text().split()[0])
            status = (task / "status").read_text().splitlines()
            name = (task / "comm").read_text().strip()
        except FileNotFoundError:
            continue
        n = sum(int(line.split()[1]) for line in status
                if line.split(":")[0] in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
        by_name[name] = by_name.get(name, 0) + n
    return cpu, by_name


def load(url, body, calls, concurrency):
    out = subprocess.run([str(RELEASE / "load"), "--url", url, "--body", json.dumps(body), "--calls", str(calls),
                          "--concurrency", str(concurrency)], check=True, capture_output=True, text=True).stdout
    got = json.loads(out)
    if got["failures"]:
        raise SystemExit(f"{url}: {got['failures']} calls failed")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", help="another build's callai, measured beside this one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000, help="calls a stage at 50 and 200 in flight")
    parser.add_argument("--calls-one", type=int, default=200, help="calls a stage at 1 in flight")
    parser.add_argument("--profile", default="release", help="the cargo profile whose binaries run")
    args = parser.parse_args()
    global RELEASE
    RELEASE = TARGET / args.profile
    work = RELEASE.parent / "bench-switches"
    work.mkdir(parents=True, exist_ok=True)
    fake_port = free_port()
    procs = [subprocess.Popen([str(RELEASE / "fake-openai"), "--port", str(fake_port), "--delay-ms", "20"],
                              stderr=subprocess.DEVNULL)]
    try:
        time.sleep(0.5)
        contenders = {"floor (hyper)": floor(fake_port)}
        if args.baseline:
            contenders["serve call (before)"] = serve(args.baseline, fake_port, work, "before")
        contenders["serve call"] = serve(RELEASE / "callai", fake_port, work, "serve")
        procs += [proc for proc, _, _ in contenders.values()]
        for _, url, body in contenders.values():
            load(url, body, 300, 50)
        results, names = {}, {}
        for _ in range(args.rounds):
            for concurrency in (1, 50, 200):
                calls = args.calls_one if concurrency == 1 else args.calls
                for name, (proc, url, body) in contenders.items():
                    cpu, before = counts(proc.pid)
                    load(url, body, calls, concurrency)
                    cpu_after, after = counts(proc.pid)
                    switches = {k: (v - before.get(k, 0)) / calls for k, v in after.items()}
                    results.setdefault((name, concurrency), []).append(
                        ((cpu_after - cpu) / 1e3 / calls, sum(switches.values())))
                    names[(name, concurrency)] = {k: round(v, 2) for k, v in switches.items() if v >= 0.01}
        print("| contender | in flight | CPU µs a call (median, range) | switches a call (median, range) | by thread, last round |")
        print("|---|---:|---:|---:|---|")
        for concurrency in (1, 50, 200):
            for name in contenders:
                runs = results[(name, concurrency)]
                cpu = sorted(r[0] for r in runs)
                sw = sorted(r[1] for r in runs)
                mid = len(runs) // 2
                print(f"| {name} | {concurrency} | {cpu[mid]:.0f} ({cpu[0]:.0f}–{cpu[-1]:.0f}) | "
                      f"{sw[mid]:.2f} ({sw[0]:.2f}–{sw[-1]:.2f}) | {names[(name, concurrency)]} |")
    finally:
        for proc in procs:
            proc.terminate()


if __name__ == "__main__":
    main()
