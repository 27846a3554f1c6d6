#!/usr/bin/env python3
"""Call traces in the run log at scale (issue 35): how long `GET /v1/calls`
takes with 1,000,000 calls in the log, and what a trace costs there per
attempt, on SQLite and on PostgreSQL.

    python3 bench/runlog/traces.py [--calls 1000000]

A real trace is made first: `callai serve` with the log, one `/v1/call` of
two attempts through the mock (its trace as the server wrote it, prompt and
answer hashes included, no text). The log is then filled with `--calls`
copies of that trace, varied as traffic varies (50 tenants, 4 providers, 10
models, four endpoints, one call in three retried with 2 or 3 attempts, one
in a thousand failed), written straight into its tables in the order a
server would have kept them, tags and all. Then a fresh `callai serve` on
the full log answers each listing 20 times over loopback HTTP; reported are
the median and the slowest, from the request sent to the body read.

Size per attempt: SQLite, the file's growth (after a WAL checkpoint) over
the attempts written; PostgreSQL, the traces' and tags' tables with their
indexes (`pg_total_relation_size`, after VACUUM) over the attempts.

Needs cargo, python3 and the PostgreSQL server binaries (see run.py).
Writes its report under <target>/bench-runlog/traces.md.
"""

import argparse
import copy
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import ROOT, WORK, Cluster, Serve, log, write_report  # noqa: E402

ENDPOINTS = ["call", "chat_completions", "messages", "run"]
QUERIES = [
    ("newest 50", "/v1/calls"),
    ("newest 500", "/v1/calls?limit=500"),
    ("one tenant", "/v1/calls?tenant=t7"),
    ("tenant and provider", "/v1/calls?tenant=t7&provider=p3"),
    ("tenant and a provider it never used", "/v1/calls?tenant=t7&provider=p0"),
    ("one model, retried", "/v1/calls?model=m3&retried=true"),
    ("a rare outcome", "/v1/calls?outcome=rate_limited"),
    ("page 100 of a tenant", None),  # the `before` of a deep page, found below
    ("since a minute from now (none)", lambda: f"/v1/calls?since={rfc3339(60)}"),
    ("the last 10 minutes, a tenant and a provider it never used",
     lambda: f"/v1/calls?since={rfc3339(-600)}&tenant=t7&provider=p0"),
]


def rfc3339(from_now_s):
    at = time.gmtime(time.time() + from_now_s)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", at)


def compact(value):
    return json.dumps(value, separators=(",", ":"))


def real_trace(runlog):
    """The trace of one real two-attempt call, as the server wrote it."""
    config = WORK / "traces.toml"
    config.write_text(f'[runlog]\nurl = "{runlog}"\n')
    serve = Serve(config)
    try:
        request = {"messages": [{"role": "user", "content": "hi"}], "maxTokens": 100,
                   "responseSchema": {"type": "object", "required": ["x"]}}
        script = [{"content": '{"x": ', "finishReason": "length", "outputTokens": 100},
                  {"content": '{"x": 1}', "outputTokens": 20}]
        req = urllib.request.Request(serve.url + "/v1/call", method="POST",
                                     data=json.dumps({"request": request, "script": script}).encode())
        with urllib.request.urlopen(req) as r:
            call_id = r.headers["x-callai-call-id"]
        return serve.get(f"/v1/calls/{call_id}")
    finally:
        serve.p.terminate()
        serve.p.wait()


def varied(trace, i, base_ms):
    """Call `i`: its row's fields, tags and JSON."""
    t = copy.deepcopy(trace)
    tenant, provider, model = f"t{i % 50}", f"p{i % 4}", f"m{i % 10}"
    attempts = 1 if i % 3 else 2 + i % 2
    outcome = "rate_limited" if i % 1000 == 999 else "ok"
    endpoint = ENDPOINTS[i % 4]
    one = t["requests"][0]
    t["requests"] = []
    for n in range(attempts):
        r = dict(one, n=n + 1, provider=provider, model=model)
        t["requests"].append(r)
    t.update(id=f"call_{i:016x}", tenant=tenant, endpoint=endpoint, outcome=outcome)
    t["attempts"]["count"] = attempts
    started = base_ms + i * 10
    tags = sorted({f"t:{tenant}", f"e:{endpoint}", f"o:{outcome}", f"p:{provider}", f"m:{model}"})
    return (t["id"], tenant, started, started + 300, attempts, compact(t)), tags


def fill_sqlite(path, trace, calls):
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    before = size_sqlite(db)
    base = int(time.time() * 1000) - calls * 10
    attempts = 0
    batch = 20_000
    for start in range(0, calls, batch):
        rows, tags = [], []
        for i in range(start, min(calls, start + batch)):
            row, t = varied(trace, i, base)
            rows.append(row)
            tags.append(t)
            attempts += row[4]
        db.execute("BEGIN")
        for row, t in zip(rows, tags):
            seq = db.execute("INSERT INTO call_traces (id, tenant, started_ms, ended_ms, attempts, trace) "
                             "VALUES (?, ?, ?, ?, ?, ?) RETURNING seq", row).fetchone()[0]
            db.executemany("INSERT INTO call_trace_tags (tag, seq) VALUES (?, ?)", [(x, seq) for x in t])
        db.execute("COMMIT")
    grown = size_sqlite(db) - before
    db.close()
    return grown, attempts


def size_sqlite(db):
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    return (pages - free) * db.execute("PRAGMA page_size").fetchone()[0]


def fill_postgres(cluster, url, trace, calls):
    base = int(time.time() * 1000) - calls * 10
    # In the cluster's folder, which `psql` (run as `postgres`) may read.
    traces_tsv, tags_tsv = cluster.dir / "traces.tsv", cluster.dir / "tags.tsv"
    attempts = 0
    # The ids a sequence would give, in order: seq i + 2 (the real call is 1).
    with open(traces_tsv, "w") as tr, open(tags_tsv, "w") as tg:
        for i in range(calls):
            row, tags = varied(trace, i, base)
            attempts += row[4]
            seq = i + 2
            fields = [str(seq), *map(str, row[:5]), row[5].replace("\\", "\\\\")]
            tr.write("\t".join(fields) + "\n")
            tg.writelines(f"{t}\t{seq}\n" for t in tags)
    os.chmod(traces_tsv, 0o644)
    os.chmod(tags_tsv, 0o644)
    size = ("SELECT pg_total_relation_size('callai_call_traces') "
            "+ pg_total_relation_size('callai_call_trace_tags')")
    before = int(psql(cluster, url, size))
    psql(cluster, url, f"\\copy callai_call_traces (seq, id, tenant, started_ms, ended_ms, attempts, trace) "
                       f"FROM '{traces_tsv}'")
    psql(cluster, url, f"\\copy callai_call_trace_tags (tag, seq) FROM '{tags_tsv}'")
    psql(cluster, url, "SELECT setval(pg_get_serial_sequence('callai_call_traces', 'seq'), "
                       "(SELECT max(seq) FROM callai_call_traces))")
    psql(cluster, url, "VACUUM ANALYZE")
    grown = int(psql(cluster, url, size)) - before
    return grown, attempts


def psql(cluster, url, sql):
    cmd = [str(cluster.bin / "psql"), url, "-qtAc", sql]
    if cluster.root:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"psql {sql[:80]}: {done.stderr}")
    return done.stdout.strip()


def timed(serve, path, rounds=20):
    took = []
    for _ in range(rounds):
        start = time.perf_counter()
        with urllib.request.urlopen(serve.url + path) as r:
            body = r.read()
        took.append((time.perf_counter() - start) * 1000)
    return statistics.median(took), max(took), len(json.loads(body)["data"])


def listings(runlog):
    config = WORK / "traces.toml"
    config.write_text(f'[runlog]\nurl = "{runlog}"\nkeepDays = 0\n')
    serve = Serve(config)
    out = {}
    try:
        for name, path in QUERIES:
            if path is None:
                before = None
                for _ in range(99):
                    q = "/v1/calls?tenant=t7" + (f"&before={before}" if before else "")
                    before = serve.get(q)["next"]
                path = f"/v1/calls?tenant=t7&before={before}"
            elif callable(path):
                path = path()
            median, slowest, n = timed(serve, path)
            out[name] = {"path": path, "median_ms": median, "max_ms": slowest, "calls": n}
            log(f"  {name}: {median:.1f} ms median, {slowest:.1f} ms slowest, {n} calls")
    finally:
        serve.p.terminate()
        serve.p.wait()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--locked", "-p", "callai-cli"], cwd=ROOT, check=True)
    WORK.mkdir(parents=True, exist_ok=True)
    results = {}
    cluster = Cluster()
    try:
        for backend in ["sqlite", "postgres"]:
            if backend == "sqlite":
                for f in WORK.glob("traces.db*"):
                    f.unlink()
                runlog = str(WORK / "traces.db")
            else:
                runlog = cluster.database()
            trace = real_trace(runlog)
            log(f"{backend}: filling {args.calls} calls")
            start = time.time()
            if backend == "sqlite":
                grown, attempts = fill_sqlite(runlog, trace, args.calls)
            else:
                grown, attempts = fill_postgres(cluster, runlog, trace, args.calls)
            log(f"  filled in {time.time() - start:.0f} s: {grown / attempts:.0f} bytes per attempt")
            results[backend] = {"bytes_per_attempt": grown / attempts, "attempts": attempts,
                                "calls": args.calls, "listings": listings(runlog)}
    finally:
        cluster.stop()
    lines = [f"{args.calls:,} calls in the log.", "",
             "| listing | " + " | ".join(f"{b} median / slowest ms" for b in results) + " |",
             "|---|" + "---:|" * len(results)]
    for name, _ in QUERIES:
        cells = [f"{r['listings'][name]['median_ms']:.1f} / {r['listings'][name]['max_ms']:.1f}"
                 for r in results.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| run log | bytes per attempt (trace, tags, indexes) |", "|---|---:|"]
    lines += [f"| {b} | {r['bytes_per_attempt']:.0f} |" for b, r in results.items()]
    write_report(lines, results, "traces.md", "traces.json")


if __name__ == "__main__":
    main()
