#!/usr/bin/env python3
"""What a gateway must cost, and what each one costs over it: `callai serve`
against two floors (nginx as a bare reverse proxy, and a pass-through proxy
on this project's own hyper/tokio stack) and the peer gateways (Portkey,
LiteLLM), all in front of one loopback fake OpenAI-compatible provider that
answers after 20 ms.

    python3 bench/floor.py                 # 10,000 calls a stage, three rounds
    python3 bench/floor.py --quick         # a smoke run: few calls, one round

For text and for structured calls, at 1, 50 and 200 in flight, each
contender gets the same calls from the same load generator; the stages are
interleaved across rounds so drift on a shared machine spreads over all of
them. Per stage and contender: CPU per call over the contender's own
process tree, and latency p50/p99, of which "added" is over the same
stage's direct calls to the fake. Before the stages, the CPU every
contender spends in an idle minute; after them, the resident memory per
call in flight (1,000 structured calls at once to a fake that answers
after 2 s, each contender fresh). Contenders:

- direct: the load generator calling the fake (the latency baseline);
- floor (hyper): `callai-bench`'s `passthrough`, bytes in, bytes out;
- nginx: the distribution's nginx (Debian's `nginx`, which `nginx-light`
  now points to), one worker, keep-alive upstream, access log off,
  extracted under the target directory (never installed system-wide, never
  started as a service) and bound to 127.0.0.1;
- serve chat / serve call / serve responses: `callai serve`,
  `/v1/chat/completions`, `/v1/call` and `/v1/responses`;
- serve call, system allocator (and serve chat, ...): the same binary built
  with `--no-default-features`, glibc's malloc instead of mimalloc;
- serve call, 1 worker: the default binary with `TOKIO_WORKER_THREADS=1`;
- serve call, tcache: the system allocator's binary with glibc's per-thread cache
  of freed blocks raised from 7 a size to 1024
  (`GLIBC_TUNABLES=glibc.malloc.tcache_count=1024`);
- serve call (no traces): the default binary keeping no call traces
  (`[server] keepCalls = 0`) and writing no line per request (`[log]
  format = "off"`), beside "serve call" with both on, as by default;
- serve call (no log line): traces kept, no line per request;
- serve call (run log): traces kept in an SQLite run log too, no line per
  request;
- serve call (one budget) / (three limits): as "run log", the calls a
  tenant's, held to one daily budget, or to three limits (requests and
  output tokens a minute, input tokens a day), none of which they reach;
- serve call (provider quota): as "run log", every request also held to
  its provider's quota (`[providers.fake.limits]`, requests and tokens a
  minute) on the run log's ledger.
- serve call (key, three limits): the same three limits on an API key of
  the tenant, made over `/v1/keys`, the calls sent with the key;
- Portkey and LiteLLM, pinned and started as `bench/peers/gateways.py` does
  (Portkey held to 127.0.0.1).

Network: 127.0.0.1 only, besides the package registries. Prints a Markdown
report and writes the raw figures to <target>/bench-floor/report.json.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "peers"))
import gateways  # noqa: E402  (the peers' installer and starters)

TARGET = gateways.TARGET
RELEASE = TARGET / "release"
WORK = TARGET / "bench-floor"
# nginx 1.22.1, as Debian 12 ships it: the archive keeps only its newest
# security builds (1.22.1-9+deb12uN), so the newest of them it offers is
# taken, and named in the log. The same upstream release each time.
NGINX_UPSTREAM = "1.22.1-"
# The contenders of the build on the system allocator (one process).
SYSTEM_ALLOC = ("serve call, system allocator", "serve chat, system allocator")
MESSAGES = [{"role": "user", "content": "Write one sentence of a scene."}]
SCHEMA = {"type": "object", "properties": {"scene": {"type": "string"}}, "required": ["scene"]}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cargo(*args):
    subprocess.run(["cargo", *args], cwd=ROOT, check=True)


def build(wanted=lambda name: True):
    """The release binaries: callai on the system allocator (kept aside,
    when it is wanted), then the default callai and the bench tools, and the
    peers (when they are wanted)."""
    WORK.mkdir(parents=True, exist_ok=True)
    if any(map(wanted, (*SYSTEM_ALLOC, "serve call, tcache"))):
        cargo("build", "--release", "--locked", "-p", "callai-cli", "--no-default-features")
        shutil.copy2(RELEASE / "callai", WORK / "callai-system-alloc")
    cargo("build", "--release", "--locked", "-p", "callai-bench",
          "--bin", "passthrough", "--bin", "load", "--bin", "fake-openai")
    if wanted("Portkey") or wanted("LiteLLM"):
        gateways.install()  # Portkey, LiteLLM and the default callai
    else:
        cargo("build", "--release", "--locked", "-p", "callai-cli")


def nginx_version():
    """The newest Debian build of nginx 1.22.1 the archive offers."""
    if not shutil.which("apt-cache"):
        raise SystemExit("this benchmark takes nginx from Debian 12's archive: apt-cache is missing")
    madison = subprocess.run(["apt-cache", "madison", "nginx"], capture_output=True, text=True).stdout
    versions = [line.split("|")[1].strip() for line in madison.splitlines() if "|" in line]
    ours = [v for v in versions if v.startswith(NGINX_UPSTREAM)]
    if not ours:
        raise SystemExit(f"the archive offers no nginx {NGINX_UPSTREAM}*: got {versions or 'none'} "
                         "(apt-get update?); this benchmark takes nginx 1.22.1 from Debian 12's archive")
    return ours[0]  # madison lists the newest first


def nginx_binary():
    """The distribution's nginx, extracted (not installed) under WORK."""
    kept = sorted(WORK.glob(f"nginx-{NGINX_UPSTREAM}*/usr/sbin/nginx"))
    if kept:
        return kept[-1]
    version = nginx_version()
    binary = WORK / f"nginx-{version}/usr/sbin/nginx"
    log(f"== fetching nginx {version} from the distribution")
    debs = WORK / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["apt-get", "download", f"nginx={version}"], cwd=debs).returncode != 0:
        raise SystemExit(f"cannot fetch nginx {version} with apt-get download: this "
                         "benchmark takes nginx from Debian 12's archive")
    deb = next(debs.glob(f"nginx_{version.replace(':', '%3a')}_*.deb"))
    subprocess.run(["dpkg-deb", "-x", str(deb), str(binary.parents[2])], check=True)
    return binary


def spawn(name, argv, env=None, ready=None):
    logf = open(WORK / f"{name}.log", "w")
    proc = subprocess.Popen(argv, stdout=logf, stderr=logf, env={**os.environ, **(env or {})})
    if ready:
        gateways.wait_up(ready, proc, name)
    return proc


def start_fake(delay_ms=20):
    port = gateways.free_port()
    proc = spawn(f"fake-{delay_ms}", [str(RELEASE / "fake-openai"), "--port", str(port),
                                      "--delay-ms", str(delay_ms)])
    gateways.wait_up(f"http://127.0.0.1:{port}/", proc, "fake")
    return proc, port


def listening(name, proc, scheme="http"):
    """The port of `name`, read from the `listening on SCHEME://ADDR` line it
    prints once it accepts."""
    logfile = WORK / f"{name}.log"
    for _ in range(100):
        text = logfile.read_text()
        if f"listening on {scheme}://" in text:
            return int(text.split(f"listening on {scheme}://", 1)[1].split()[0].rsplit(":", 1)[1])
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited: see {logfile}")
        time.sleep(0.1)
    raise SystemExit(f"{name} did not start")


def start_fake_tls(delay_ms=20):
    """The fake over TLS, HTTP/2 or HTTP/1.1 by ALPN, 100 streams a
    connection, its certificate's CA written under WORK: its process, port
    and CA file."""
    ca = WORK / "fake-tls-ca.pem"
    ca.unlink(missing_ok=True)
    name = f"fake-tls-{delay_ms}"
    proc = spawn(name, [str(RELEASE / "fake-openai"), "--port", "0", "--delay-ms", str(delay_ms),
                        "--tls-ca", str(ca)])
    return proc, listening(name, proc, "https"), ca


def start_passthrough(name, fake_port):
    """The hyper floor in front of the fake; its process and port."""
    proc = spawn(name, [str(RELEASE / "passthrough"), "--upstream", f"http://127.0.0.1:{fake_port}"])
    return proc, listening(name, proc)


def start_nginx(fake_port, ca=None, name="nginx"):
    """nginx in front of the fake; with `ca`, over TLS to it (HTTP/1.1, the
    only version nginx proxies in), the fake's certificate checked against
    `ca` and TLS sessions reused."""
    port = gateways.free_port()
    tmp = WORK / f"{name}-tmp"
    tmp.mkdir(exist_ok=True)
    temp_paths = "".join(f"  {k}_temp_path {tmp}/{k};\n" for k in
                         ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"])
    tls = (f"      proxy_ssl_trusted_certificate {ca};\n      proxy_ssl_verify on;\n"
           "      proxy_ssl_name localhost;\n      proxy_ssl_session_reuse on;\n") if ca else ""
    conf = WORK / f"{name}.conf"
    conf.write_text(f"""worker_processes 1;
daemon off;
pid {WORK}/{name}.pid;
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
{temp_paths}  keepalive_requests 1000000;
  upstream fake {{ server 127.0.0.1:{fake_port}; keepalive 512; keepalive_requests 1000000; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass {"https" if ca else "http"}://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
{tls}    }}
  }}
}}
""")
    proc = spawn(name, [str(nginx_binary()), "-p", str(WORK), "-c", str(conf), "-e", "stderr"],
                 ready=f"http://127.0.0.1:{port}/")
    return proc, port


def start_serve(name, binary, fake_port, env=None, extra=(), toml="", ca=None):
    """`callai serve` in front of the fake; with `ca`, over TLS to it (HTTP/2
    by ALPN), trusting `ca` for that provider."""
    port = gateways.free_port()
    cfg = WORK / f"{name}.toml"
    scheme, trust = ("https", f'caFile = "{ca}"\n') if ca else ("http", "")
    cfg.write_text(f'[providers.fake]\nkind = "openai"\nbaseUrl = "{scheme}://127.0.0.1:{fake_port}/v1"\n'
                   f'apiKeyEnv = "FAKE_KEY"\nmodel = "fake"\n{trust}[defaults]\nprovider = "fake"\n'
                   f'[limits]\nmaxConcurrentRuns = 1000\n{toml}')
    proc = spawn(name, [str(binary), "serve", "--config", str(cfg), "--listen", f"127.0.0.1:{port}", *extra],
                 env={"FAKE_KEY": "sk-fake", **(env or {})}, ready=f"http://127.0.0.1:{port}/healthz")
    return proc, port


def post_json(url, body, headers):
    """POSTs `body` as JSON; the JSON answer."""
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"content-type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def openai_body(kind):
    body = {"model": "fake", "max_tokens": 200, "messages": MESSAGES}
    if kind == "structured":
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "scene", "schema": SCHEMA}}
    return body


def responses_body(kind):
    body = {"model": "fake", "max_output_tokens": 200, "input": MESSAGES, "store": False}
    if kind == "structured":
        body["text"] = {"format": {"type": "json_schema", "name": "scene", "schema": SCHEMA}}
    return body


def call_body(kind):
    request = {"messages": MESSAGES, "maxTokens": 200}
    if kind == "structured":
        request["responseSchema"] = SCHEMA
    return {"request": request}


def contenders(fake_port, procs, wanted=lambda name: True, baseline=None):
    """name -> (pid or None, url, body(kind), headers), of the contenders
    `wanted` keeps (the others are not started); with `baseline`, a callai
    binary of another build, its two endpoints too ("... (before)")."""
    out = {"direct": (None, f"http://127.0.0.1:{fake_port}/v1/chat/completions", openai_body, {})}
    if baseline:
        proc, port = start_serve("serve-before", baseline, fake_port)
        procs.append(proc)
        out["serve chat (before)"] = (proc.pid, f"http://127.0.0.1:{port}/v1/chat/completions", openai_body, {})
        out["serve call (before)"] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", call_body, {})
    proc, port = start_passthrough("passthrough", fake_port)
    procs.append(proc)
    out["floor (hyper)"] = (proc.pid, f"http://127.0.0.1:{port}/v1/chat/completions", openai_body, {})
    proc, port = start_nginx(fake_port)
    procs.append(proc)
    out["nginx"] = (proc.pid, f"http://127.0.0.1:{port}/v1/chat/completions", openai_body, {})
    proc, port = start_serve("serve", RELEASE / "callai", fake_port)
    procs.append(proc)
    out["serve chat"] = (proc.pid, f"http://127.0.0.1:{port}/v1/chat/completions", openai_body, {})
    out["serve call"] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", call_body, {})
    out["serve responses"] = (proc.pid, f"http://127.0.0.1:{port}/v1/responses", responses_body, {})
    if any(map(wanted, SYSTEM_ALLOC)):
        proc, port = start_serve("serve-system-alloc", WORK / "callai-system-alloc", fake_port)
        procs.append(proc)
        out["serve call, system allocator"] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", call_body, {})
        out["serve chat, system allocator"] = (proc.pid, f"http://127.0.0.1:{port}/v1/chat/completions",
                                               openai_body, {})
    if wanted("serve call (no traces)"):
        # Call traces kept for none, and no line per request on stderr.
        proc, port = start_serve("serve-notraces", RELEASE / "callai", fake_port,
                                 toml='[server]\nkeepCalls = 0\n[log]\nformat = "off"\n')
        procs.append(proc)
        out["serve call (no traces)"] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", call_body, {})
    if wanted("serve call (no log line)"):
        # Call traces kept as by default; no line per request.
        proc, port = start_serve("serve-nolog", RELEASE / "callai", fake_port,
                                 toml='[log]\nformat = "off"\n')
        procs.append(proc)
        out["serve call (no log line)"] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", call_body, {})
    if wanted("serve call (run log)"):
        # Traces kept in an SQLite run log as well (issue 35), no line per
        # request; a fresh log each start.
        runlog = WORK / "serve-runlog.db"
        for f in WORK.glob("serve-runlog.db*"):
            f.unlink()
        proc, port = start_serve("serve-runlog", RELEASE / "callai", fake_port,
                                 toml=f'[runlog]\nurl = "{runlog}"\n[log]\nformat = "off"\n')
        procs.append(proc)
        out["serve call (run log)"] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", call_body, {})
    # A tenant's calls held to one daily budget, and to three limits (two
    # per minute, one per day; issue 53), in an SQLite run log of their own.
    huge = 10 ** 15
    for label, slug, limits in [
        ("serve call (one budget)", "serve-budget",
         f'[tenants.t.budget]\nrequests = {huge}\nwindow = "1d"\n'),
        ("serve call (three limits)", "serve-limits",
         f'[[tenants.t.limits]]\nrequests = {huge}\nper = "1m"\n'
         f'[[tenants.t.limits]]\noutputTokens = {huge}\nper = "1m"\n'
         f'[[tenants.t.limits]]\ninputTokens = {huge}\nper = "1d"\n'),
        # Every request held to its provider's quota (requests, and tokens
        # together, a minute) on the same ledger.
        ("serve call (provider quota)", "serve-quota",
         f'[providers.fake.limits]\nrequests = {huge}\ntokens = {huge}\n'),
    ]:
        if not wanted(label):
            continue
        runlog = WORK / f"{slug}.db"
        for f in WORK.glob(f"{slug}.db*"):
            f.unlink()
        proc, port = start_serve(slug, RELEASE / "callai", fake_port, {"T_TOKEN": "tok-bench"},
                                 toml=f'[runlog]\nurl = "{runlog}"\n[log]\nformat = "off"\n'
                                      f'[tenants.t]\ntokenEnv = "T_TOKEN"\n{limits}')
        procs.append(proc)
        out[label] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", call_body,
                      {"authorization": "Bearer tok-bench"})
    if wanted("serve call (key, three limits)"):
        # The same three limits on an API key of the tenant (made over the
        # API), looked up in the host's key table on every call.
        runlog = WORK / "serve-key.db"
        for f in WORK.glob("serve-key.db*"):
            f.unlink()
        proc, port = start_serve("serve-key", RELEASE / "callai", fake_port,
                                 {"T_TOKEN": "tok-bench", "ADMIN_TOKEN": "tok-admin"},
                                 toml=f'[server]\ntokenEnv = "ADMIN_TOKEN"\n[runlog]\nurl = "{runlog}"\n'
                                      f'[log]\nformat = "off"\n[tenants.t]\ntokenEnv = "T_TOKEN"\n')
        procs.append(proc)
        limits = [{"requests": huge, "per": "1m"}, {"outputTokens": huge, "per": "1m"},
                  {"inputTokens": huge, "per": "1d"}]
        made = post_json(f"http://127.0.0.1:{port}/v1/keys",
                                  {"name": "bench", "tenant": "t", "limits": limits},
                                  {"authorization": "Bearer tok-admin"})
        out["serve call (key, three limits)"] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", call_body,
                                                 {"authorization": f"Bearer {made['key']}"})
    if wanted("serve call, tcache"):
        proc, port = start_serve("serve-tcache", WORK / "callai-system-alloc", fake_port,
                                 {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=1024"})
        procs.append(proc)
        out["serve call, tcache"] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", call_body, {})
    if wanted("serve call, 1 worker"):
        proc, port = start_serve("serve-1worker", RELEASE / "callai", fake_port, {"TOKIO_WORKER_THREADS": "1"})
        procs.append(proc)
        out["serve call, 1 worker"] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", call_body, {})
    tls_names = ["nginx (TLS upstream)", "serve chat (TLS h2 upstream)", "serve call (TLS h2 upstream)"]
    if any(wanted(n) for n in tls_names):
        # The same stages through a TLS upstream, as production's: nginx
        # (TLS, HTTP/1.1 upstream) as the floor, serve over HTTP/2.
        proc, tls_port, ca = start_fake_tls()
        procs.append(proc)
        proc, port = start_nginx(tls_port, ca, "nginx-tls")
        procs.append(proc)
        out["nginx (TLS upstream)"] = (proc.pid, f"http://127.0.0.1:{port}/v1/chat/completions", openai_body, {})
        proc, port = start_serve("serve-tls", RELEASE / "callai", tls_port, ca=ca)
        procs.append(proc)
        out["serve chat (TLS h2 upstream)"] = (proc.pid, f"http://127.0.0.1:{port}/v1/chat/completions",
                                                openai_body, {})
        out["serve call (TLS h2 upstream)"] = (proc.pid, f"http://127.0.0.1:{port}/v1/call", call_body, {})
    fake_url = f"http://127.0.0.1:{fake_port}/v1"
    for peer, label in [("portkey", "Portkey"), ("litellm", "LiteLLM")]:
        if not wanted(label):
            continue
        proc, url, headers, _ = gateways.start(peer, fake_url)
        procs.append(proc)
        out[label] = (proc.pid, url, openai_body, headers)
    return out


def load(url, body, headers, calls, concurrency):
    out = subprocess.run([str(RELEASE / "load"), "--url", url, "--body", json.dumps(body),
                          "--headers", json.dumps(headers), "--calls", str(calls),
                          "--concurrency", str(concurrency)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def threads_ns(pid):
    """{thread id: CPU ns} over `pid`'s process tree, from schedstat."""
    out = {}
    for p in gateways.process_tree(pid):
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                out[task.name] = int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def tree_cpu_s(pid, work):
    """The CPU seconds `pid`'s tree spends on `work()`: to the nanosecond
    from each thread's schedstat when every thread lived through it, else
    (a thread ended, taking its count) in the 10 ms ticks of /proc/PID/stat,
    which keep the time of ended threads."""
    ticks, threads = gateways.tree_cpu(pid), threads_ns(pid)
    result = work()
    ticks, after = gateways.tree_cpu(pid) - ticks, threads_ns(pid)
    if set(threads) <= set(after):
        return sum(ns - threads.get(t, 0) for t, ns in after.items()) / 1e9, result
    return ticks, result


def stage(contender, kind, concurrency, calls):
    pid, url, body, headers = contender
    run = lambda: load(url, body(kind), headers, calls, concurrency)  # noqa: E731
    spent, got = tree_cpu_s(pid, run) if pid else (0.0, run())
    return {"cpu_us": 1e6 * spent / calls, "p50_ms": got["p50_ms"], "p99_ms": got["p99_ms"],
            "failures": got["failures"], "calls": calls}


def memory_in_flight(calls, baseline=None, wanted=lambda name: True):
    """Resident memory per call in flight: `calls` structured calls at once
    to a fake that answers after 2 s, each contender fresh; the peak of its
    resident set during them over its resident set before any. With
    `baseline`, that build's /v1/call too; with the system allocator's build
    wanted, its two endpoints."""
    procs, out = [], {}
    try:
        fake, fake_port = start_fake(2000)
        procs.append(fake)
        proc, port = start_passthrough("passthrough-slow", fake_port)
        procs.append(proc)
        targets = {"floor (hyper)": (proc.pid, f"http://127.0.0.1:{port}/v1/chat/completions", openai_body)}
        proc, port = start_nginx(fake_port)
        procs.append(proc)
        worker = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])
        targets["nginx"] = (worker, f"http://127.0.0.1:{port}/v1/chat/completions", openai_body)
        serves = [("serve chat", RELEASE / "callai", "/v1/chat/completions", openai_body),
                  ("serve call", RELEASE / "callai", "/v1/call", call_body)]
        if baseline:
            serves += [("serve chat (before)", baseline, "/v1/chat/completions", openai_body),
                       ("serve call (before)", baseline, "/v1/call", call_body)]
        if any(map(wanted, SYSTEM_ALLOC)):
            system = WORK / "callai-system-alloc"
            serves += [("serve chat, system allocator", system, "/v1/chat/completions", openai_body),
                       ("serve call, system allocator", system, "/v1/call", call_body)]
        for name, binary, path, body in serves:
            proc, port = start_serve(f"serve-slow-{len(procs)}", binary, fake_port)
            procs.append(proc)
            targets[name] = (proc.pid, f"http://127.0.0.1:{port}{path}", body)
        for name, (pid, url, body) in targets.items():
            idle = int(Path(f"/proc/{pid}/status").read_text().split("VmRSS:")[1].split()[0])
            got = json.loads(subprocess.run(
                [str(RELEASE / "load"), "--url", url, "--body", json.dumps(body("structured")),
                 "--calls", str(calls), "--concurrency", str(calls), "--watch-pid", str(pid)],
                check=True, capture_output=True, text=True).stdout)
            out[name] = {"idle_kib": idle, "peak_kib": got["watched_peak_rss_kib"],
                         "kib_per_call": (got["watched_peak_rss_kib"] - idle) / calls,
                         "failures": got["failures"]}
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
    return out


def idle_minute(pids, seconds):
    before = {name: gateways.tree_cpu(pid) for name, pid in pids.items()}
    time.sleep(seconds)
    return {name: (gateways.tree_cpu(pid) - before[name]) * 60 / seconds for name, pid in pids.items()}


def fmt_range(values, digits=0):
    lo, hi = min(values), max(values)
    f = f"{{:.{digits}f}}"
    return f.format(lo) if f.format(lo) == f.format(hi) else f"{f.format(lo)}–{f.format(hi)}"


def report(results, rounds, idle, calls, memory):
    """Markdown: per kind and concurrency, each contender's medians over the
    rounds (ranges where they differ), and the targets' ratios."""
    lines = [f"## The floor, {time.strftime('%Y-%m-%d')}: {rounds} round(s), {calls} calls a stage "
             "(fewer at 1 in flight and for the peers, as the table says), fake provider 20 ms\n"]
    for kind in ["text", "structured"]:
        for concurrency in [1, 50, 200]:
            rows = {name: rs for (k, c, name), rs in results.items() if k == kind and c == concurrency}
            if not rows:
                continue
            nginx = statistics.median(r["cpu_us"] for r in rows["nginx"])
            # A contender through the TLS upstream is held to nginx through it.
            nginx_tls = (statistics.median(r["cpu_us"] for r in rows["nginx (TLS upstream)"])
                         if "nginx (TLS upstream)" in rows else nginx)
            direct = {i: r for i, r in enumerate(rows["direct"])}
            lines.append(f"\n### {kind}, {concurrency} in flight\n")
            lines.append("| contender | calls | CPU µs/call | × nginx | p50 ms | p99 ms | added p50 ms | added p99 ms | failed |")
            lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
            for name, rs in rows.items():
                cpu = [r["cpu_us"] for r in rs]
                added50 = [r["p50_ms"] - direct[i]["p50_ms"] for i, r in enumerate(rs)]
                added99 = [r["p99_ms"] - direct[i]["p99_ms"] for i, r in enumerate(rs)]
                base = nginx_tls if "(TLS" in name else nginx
                ratio = statistics.median(cpu) / base if base else 0
                lines.append(
                    f"| {name} | {rs[0]['calls']} | {fmt_range(cpu)} | "
                    f"{'' if name == 'direct' else f'{ratio:.2f}'} | "
                    f"{fmt_range([r['p50_ms'] for r in rs], 2)} | {fmt_range([r['p99_ms'] for r in rs], 2)} | "
                    f"{'' if name == 'direct' else fmt_range(added50, 2)} | "
                    f"{'' if name == 'direct' else fmt_range(added99, 2)} | "
                    f"{sum(r['failures'] for r in rs)} |")
    lines.append("\n### Memory per call in flight (structured, the fake answering after 2 s)\n")
    lines.append("| contender | idle MiB | peak MiB | KiB per call in flight | failed |")
    lines.append("|---|---:|---:|---:|---:|")
    for name, m in memory.items():
        lines.append(f"| {name} | {m['idle_kib'] / 1024:.1f} | {m['peak_kib'] / 1024:.1f} | "
                     f"{m['kib_per_call']:.1f} | {m['failures']} |")
    lines.append("\n### An idle minute\n")
    lines.append("| contender | CPU s per idle minute |")
    lines.append("|---|---:|")
    for name, seconds in idle.items():
        lines.append(f"| {name} | {seconds:.2f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=10000, help="calls a stage at 50 and 200 in flight")
    parser.add_argument("--calls-one", type=int, default=1000, help="calls a stage at 1 in flight")
    parser.add_argument("--peer-calls", type=int, default=2000, help="at most this many for Portkey, LiteLLM")
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--only", help="contenders separated by commas, or by semicolons when a name has "
                        "a comma (direct and nginx are always run)")
    parser.add_argument("--memory-only", action="store_true", help="only memory per call in flight")
    parser.add_argument("--baseline", help="a callai binary of another build, measured beside this one "
                        "as \"serve call (before)\" and \"serve chat (before)\"")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.calls, args.calls_one, args.peer_calls, args.idle_seconds = 1, 400, 50, 200, 10
    keep = {"direct", "nginx", "serve chat (before)", "serve call (before)",
            *(args.only.split(";" if ";" in args.only else ",") if args.only else [])}
    wanted = (lambda name: name in keep) if args.only else (lambda name: True)
    build(wanted)
    if args.memory_only:
        memory = memory_in_flight(100 if args.quick else 1000, args.baseline, wanted)
        print(json.dumps(memory, indent=2))
        return
    procs = []
    try:
        fake, fake_port = start_fake()
        procs.append(fake)
        everyone = contenders(fake_port, procs, wanted, args.baseline)
        everyone = {k: v for k, v in everyone.items() if wanted(k)}
        runlog = WORK / "idle-runlog.db"
        runlog.unlink(missing_ok=True)
        proc, _ = start_serve("serve-runlog", RELEASE / "callai", fake_port, extra=["--runlog", str(runlog)])
        procs.append(proc)
        # Warm every contender's connections and caches, both kinds.
        for name, contender in everyone.items():
            for kind in ["text", "structured"]:
                stage(contender, kind, 50, 200)
        log("== an idle minute")
        pids = {name: c[0] for name, c in everyone.items() if c[0] and name != "serve call"}
        pids["serve, with a run log"] = proc.pid
        idle = idle_minute(pids, args.idle_seconds)
        results = {}
        names = list(everyone)
        for r in range(args.rounds):
            for kind in ["text", "structured"]:
                for concurrency in [1, 50, 200]:
                    # Rotate the order each round: no contender always goes first.
                    order = names[r % len(names):] + names[:r % len(names)]
                    order.remove("direct")
                    for name in ["direct", *order]:
                        calls = args.calls_one if concurrency == 1 else args.calls
                        if name in ("Portkey", "LiteLLM"):
                            calls = min(calls, args.peer_calls)
                        log(f"== round {r + 1}, {kind}, {concurrency} in flight: {name} ({calls} calls)")
                        results.setdefault((kind, concurrency, name), []).append(
                            stage(everyone[name], kind, concurrency, calls))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    log("== memory per call in flight")
    memory = memory_in_flight(100 if args.quick else 1000, args.baseline, wanted)
    (WORK / "report.json").write_text(json.dumps(
        {"results": [{"kind": k, "concurrency": c, "contender": n, "rounds": rs}
                     for (k, c, n), rs in results.items()], "idle": idle, "memory": memory}, indent=2))
    text = report(results, args.rounds, idle, args.calls, memory)
    (WORK / "report.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
