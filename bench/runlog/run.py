#!/usr/bin/env python3
"""The run-log benchmark: calls committed per second on PostgreSQL and on
SQLite, by one host and by four hosts on this machine; and how long a
takeover takes after the host of a durable run dies.

    python3 bench/runlog/run.py

- commits: each "host" is a process of 8 recorders, each recording runs of
  20 calls, one transaction per call (as `callai serve` commits them), for
  5 seconds; four hosts are four such processes at once on one log.
  PostgreSQL runs with its defaults (fsync and synchronous_commit on),
  SQLite with the run log's own settings (WAL, synchronous=FULL).
- takeover: two `callai serve` on one log, `[runlog] leaseMs` L; a durable
  run starts on host A, whose provider request is held; A is killed with
  SIGKILL; the time until host B's provider request for the same call
  arrives is the takeover time (the lease lapsing, B noticing, B resuming
  the run). Three times per backend and lease, the median reported.

Needs cargo, python3 and the PostgreSQL server binaries
(/usr/lib/postgresql/*/bin; as root, the cluster runs as `postgres`).
Writes its report under <target>/bench-runlog/.
"""

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
RELEASE = TARGET / "release"
WORK = TARGET / "bench-runlog"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def pg_bin():
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if not found:
        raise SystemExit("PostgreSQL server binaries not found under /usr/lib/postgresql")
    return found[-1].parent


class Cluster:
    def __init__(self):
        self.bin = pg_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="callai-bench-pg-"))
        self.root = os.geteuid() == 0
        if self.root:
            shutil.chown(self.dir, "postgres", "postgres")
        self.data = self.dir / "data"
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=300"
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-o", opts, "-w", "start")
        self.n = 0

    def run(self, tool, *args):
        cmd = [str(self.bin / tool), *args]
        if self.root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True)

    def database(self):
        self.n += 1
        name = f"bench{self.n}"
        self.run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "postgres",
                 "-qc", f"CREATE DATABASE {name}")
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self):
        self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


def commits(url, hosts):
    procs = [subprocess.Popen([str(RELEASE / "commits"), "--url", url, "--writers", "8",
                               "--seconds", "5", "--tag", f"h{h}"],
                              stdout=subprocess.PIPE, text=True) for h in range(hosts)]
    outs = [json.loads(p.communicate()[0]) for p in procs]
    return {"hosts": hosts, "per_s": sum(o["per_s"] for o in outs),
            "calls_committed": sum(o["calls_committed"] for o in outs)}


class Serve:
    def __init__(self, config):
        self.p = subprocess.Popen([str(RELEASE / "callai"), "serve", "--listen", "127.0.0.1:0",
                                   "--config", str(config)],
                                  stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        line = self.p.stderr.readline()
        if not line.startswith("listening on "):
            raise SystemExit(f"serve did not start: {line}")
        self.url = line.split()[-1]
        threading.Thread(target=lambda: self.p.stderr.read(), daemon=True).start()

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())

    def get(self, path):
        with urllib.request.urlopen(self.url + path) as r:
            return json.loads(r.read())


def takeover(url, lease_ms, rounds=3):
    times = []
    for i in range(rounds):
        fake = subprocess.Popen([str(RELEASE / "fake-openai"), "--hold", "1", "--log", "--delay-ms", "5"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        fake_url = fake.stderr.readline().split()[-1]
        arrivals = []
        threading.Thread(target=lambda: [arrivals.append(int(l.split()[1])) for l in fake.stdout],
                         daemon=True).start()
        config = WORK / f"takeover-{lease_ms}.toml"
        config.write_text(
            f'[defaults]\nprovider = "local"\n[providers.local]\nkind = "openai"\nbaseUrl = "{fake_url}/v1"\n'
            f'apiKeyEnv = ""\nmodel = "fake"\n[runlog]\nurl = "{url}"\nleaseMs = {lease_ms}\n')
        a, b = Serve(config), Serve(config)
        run_id = f"takeover-{lease_ms}-{i}-{time.time_ns()}"
        request = {"messages": [{"role": "user", "content": "hi"}]}
        a.post("/v1/runs", {"pack": "echo-attempts", "input": request, "durable": True,
                            "runId": run_id, "wait": False})
        while not arrivals:
            time.sleep(0.002)
        a.p.send_signal(signal.SIGKILL)
        a.p.wait()
        killed = time.time_ns() // 1_000_000
        deadline = time.time() + lease_ms / 1000 + 30
        while len(arrivals) < 2:
            if time.time() > deadline:
                raise SystemExit("B never resumed the run")
            time.sleep(0.002)
        times.append(arrivals[1] - killed)
        while b.get(f"/v1/runs/{run_id}")["status"] == "running":
            time.sleep(0.02)
        b.p.terminate()
        b.p.wait()
        fake.terminate()
        fake.wait()
    return {"lease_ms": lease_ms, "takeover_ms": times, "median_ms": statistics.median(times)}


def fresh_log(backend, name, cluster):
    """An empty run log: the SQLite file `name`.db under WORK (its old copy
    and journal removed), or a new database in the PostgreSQL cluster."""
    if backend == "postgres":
        return cluster.database()
    for f in WORK.glob(f"{name}.db*"):
        f.unlink()
    return str(WORK / f"{name}.db")


def write_report(lines, results, markdown, raw):
    """Prints the report's `lines` and keeps them, and the raw `results`,
    under WORK as `markdown` and `raw`."""
    report = "\n".join(lines) + "\n"
    print(report)
    (WORK / markdown).write_text(report)
    (WORK / raw).write_text(json.dumps(results, indent=2))


def main():
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "callai-bench", "-p", "callai-cli"],
                   cwd=ROOT, check=True)
    WORK.mkdir(parents=True, exist_ok=True)
    cluster = Cluster()
    results = {"commits": {}, "takeover": {}}
    try:
        for backend in ["sqlite", "postgres"]:
            for hosts in [1, 4]:
                url = fresh_log(backend, f"commits-{hosts}", cluster)
                log(f"commits: {backend}, {hosts} host(s)")
                results["commits"][f"{backend} {hosts}"] = commits(url, hosts)
        for backend in ["sqlite", "postgres"]:
            for lease in [1000, 3000]:
                url = fresh_log(backend, f"takeover-{lease}", cluster)
                log(f"takeover: {backend}, leaseMs {lease}")
                results["takeover"][f"{backend} {lease}"] = takeover(url, lease)
    finally:
        cluster.stop()
    lines = ["| run log | hosts | calls committed/s |", "|---|---:|---:|"]
    for key, r in results["commits"].items():
        backend, hosts = key.split()
        lines.append(f"| {backend} | {hosts} | {r['per_s']:.0f} |")
    lines += ["", "| run log | leaseMs | takeover ms (median of 3) | each |", "|---|---:|---:|---|"]
    for key, r in results["takeover"].items():
        backend, lease = key.split()
        lines.append(f"| {backend} | {lease} | {r['median_ms']:.0f} | {', '.join(map(str, r['takeover_ms']))} |")
    write_report(lines, results, "report.md", "results.json")


if __name__ == "__main__":
    main()
