#!/usr/bin/env python3
"""The gateways side by side: `callai serve` (its OpenAI-compatible
endpoint), Portkey's AI gateway and the LiteLLM proxy, each in front of one
loopback fake OpenAI-compatible provider, on what a retried call really
cost.

    python3 bench/peers/gateways.py             # accounting and CPU per call
    python3 bench/peers/gateways.py --quick     # fewer calls

1. Accounting: five scripted retry scenarios (a truncation, a schema
   violation, invalid JSON, a 503, missing usage), each one structured call
   (`response_format` json_schema) through each gateway with its retries on.
   The fake counts the requests it received and the output tokens it
   reported; a gateway is right when what it tells its caller (an attempts
   record where it has one, else `usage`) matches, and its answer is valid.
2. CPU per call: CALLS structured calls, 200 in flight, the fake answering
   valid JSON after 20 ms; each gateway's CPU over its own process tree.

Installs Portkey and LiteLLM from the pinned files beside this one into the
cargo target directory (never into the repository). Portkey listens on
every interface unless told otherwise: it is started with
`portkey/loopback.mjs` preloaded, which holds it to 127.0.0.1. Network:
127.0.0.1 only, besides the package registries. Prints a Markdown report.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
WORK = TARGET / "bench-gateways"
SCHEMA = {"type": "object", "properties": {"scene": {"type": "string"}}, "required": ["scene"],
          "additionalProperties": False}
GOOD = '{"scene": "Rain on the window."}'


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Fake:
    """A loopback OpenAI-compatible provider answering a script: each entry
    (status, content, finish_reason, completion_tokens or None) in turn; past
    the script, GOOD after `delay`."""

    def __init__(self, delay=0.0):
        self.script, self.delay = [], delay
        self.requests, self.tokens, self.lock = 0, 0, threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                self.rfile.read(length)
                with fake.lock:
                    fake.requests += 1
                    entry = fake.script.pop(0) if fake.script else (200, GOOD, "stop", 9)
                status, content, finish, tokens = entry
                if fake.delay:
                    time.sleep(fake.delay)
                if status != 200:
                    body = json.dumps({"error": {"message": "busy", "type": "server_error"}})
                else:
                    answer = {"id": "c", "object": "chat.completion", "created": 0, "model": "fake",
                              "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                           "finish_reason": finish}]}
                    if tokens is not None:
                        with fake.lock:
                            fake.tokens += tokens
                        answer["usage"] = {"prompt_tokens": 12, "completion_tokens": tokens,
                                           "total_tokens": 12 + tokens}
                    body = json.dumps(answer)
                data = body.encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self, script):
        with self.lock:
            self.script, self.requests, self.tokens = list(script), 0, 0


SCENARIOS = [
    ("truncated, then valid", [(200, '{"scene": "Rain on', "length", 100), (200, GOOD, "stop", 20)]),
    ("schema violation, then valid", [(200, '{"place": 1}', "stop", 30), (200, GOOD, "stop", 20)]),
    ("invalid JSON, then valid", [(200, "{scene: rain", "stop", 30), (200, GOOD, "stop", 20)]),
    ("503, then valid", [(503, "", "", None), (200, GOOD, "stop", 20)]),
    ("valid, usage missing", [(200, GOOD, "stop", None)]),
]


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url, proc, what):
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited: see {WORK}/{what}.log")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{what} did not start")


def install():
    WORK.mkdir(parents=True, exist_ok=True)
    portkey = WORK / "portkey"
    if not (portkey / "node_modules/@portkey-ai/gateway").exists():
        log("== installing Portkey's gateway (pinned)")
        portkey.mkdir(exist_ok=True)
        for f in ["package.json", "package-lock.json"]:
            (portkey / f).write_bytes((HERE / "portkey" / f).read_bytes())
        subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=portkey, check=True)
    venv = WORK / "litellm"
    if not (venv / "bin/litellm").exists():
        log("== installing the LiteLLM proxy (pinned)")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin/pip"), "install", "-q", "--require-hashes", "--only-binary=:all:",
                        "-r", str(HERE / "litellm/requirements.txt")], check=True)
    subprocess.run(["cargo", "build", "--release", "--locked", "--bin", "callai"], cwd=ROOT, check=True)


def start(name, fake_url):
    """Starts contender `name` in front of `fake_url`; its process, its chat
    completions URL, the headers and the model a request carries."""
    port = free_port()
    logf = open(WORK / f"{name}.log", "w")
    if name == "callai":
        cfg = WORK / "callai.toml"
        cfg.write_text(f'[providers.fake]\nkind = "openai"\nbaseUrl = "{fake_url}"\napiKeyEnv = "FAKE_KEY"\n'
                       f'model = "fake"\n[retry]\nbackoffBaseMs = 10\nbackoffMaxMs = 20\n'
                       f'[limits]\nmaxConcurrentRuns = 1000\n')
        binary = TARGET / "release/callai"
        proc = subprocess.Popen([str(binary), "serve", "--config", str(cfg), "--listen", f"127.0.0.1:{port}"],
                                stdout=logf, stderr=logf, env={**os.environ, "FAKE_KEY": "sk-fake"})
        wait_up(f"http://127.0.0.1:{port}/healthz", proc, name)
        return proc, f"http://127.0.0.1:{port}/v1/chat/completions", {}, "fake"
    if name == "portkey":
        gateway = WORK / "portkey/node_modules/@portkey-ai/gateway/build/start-server.js"
        proc = subprocess.Popen(["node", "--import", str(HERE / "portkey/loopback.mjs"), str(gateway),
                                 f"--port={port}", "--headless"], stdout=logf, stderr=logf,
                                env={**os.environ, "NODE_ENV": "production"})
        wait_up(f"http://127.0.0.1:{port}/", proc, name)
        config = {"provider": "openai", "api_key": "sk-fake", "custom_host": fake_url,
                  "retry": {"attempts": 2}}
        return proc, f"http://127.0.0.1:{port}/v1/chat/completions", {"x-portkey-config": json.dumps(config)}, "fake"
    if name == "litellm":
        cfg = WORK / "litellm.yaml"
        cfg.write_text("model_list:\n  - model_name: fake\n    litellm_params:\n      model: openai/fake\n"
                       f"      api_base: {fake_url}\n      api_key: sk-fake\n"
                       "litellm_settings:\n  num_retries: 2\n")
        # It refuses to start without a master key, which callers then send.
        import secrets
        master = "sk-" + secrets.token_hex(32)
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_DOCS": "True",
               "LITELLM_MASTER_KEY": master}
        proc = subprocess.Popen([str(WORK / "litellm/bin/litellm"), "--config", str(cfg), "--host", "127.0.0.1",
                                 "--port", str(port), "--num_workers", "1"], stdout=logf, stderr=logf, env=env)
        wait_up(f"http://127.0.0.1:{port}/health/liveliness", proc, name)
        return proc, f"http://127.0.0.1:{port}/v1/chat/completions", {"authorization": f"Bearer {master}"}, "fake"
    raise ValueError(name)


def call(url, headers, model):
    body = json.dumps({"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": "a scene"}],
                       "response_format": {"type": "json_schema",
                                           "json_schema": {"name": "scene", "schema": SCHEMA, "strict": True}}})
    request = urllib.request.Request(url, body.encode(), {"content-type": "application/json",
                                                          "authorization": "Bearer sk-fake", **headers})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read() or b"{}")


def valid(answer):
    try:
        content = json.loads(answer["choices"][0]["message"]["content"])
        return isinstance(content, dict) and isinstance(content.get("scene"), str) and set(content) == {"scene"}
    except (KeyError, IndexError, TypeError, ValueError):
        return False


def accounting(name, fake):
    proc, url, headers, model = start(name, fake.url)
    rows = []
    try:
        for scenario, script in SCENARIOS:
            fake.reset(script)
            status, got_headers, answer = call(url, headers, model)
            time.sleep(0.2)
            attempts = (answer.get("callai") or {}).get("attempts")
            usage = answer.get("usage") or {}
            # What each says of its retries, where it says anything: callai's
            # attempts record; Portkey's and LiteLLM's retry-count headers.
            lowered = {k.lower(): v for k, v in got_headers.items()}
            retries = lowered.get("x-portkey-retry-attempt-count") or lowered.get("x-litellm-attempted-retries")
            if attempts:
                told = (attempts["count"], attempts.get("outputTokens"), attempts["usageComplete"])
            else:
                count = int(retries) + 1 if retries and retries.lstrip("-").isdigit() and int(retries) >= 0 else None
                told = (count, usage.get("completion_tokens"), None)
            sent = script[:fake.requests] + [(200, GOOD, "stop", 9)] * max(0, fake.requests - len(script))
            reported = [t for _, _, _, t in sent if t is not None]
            truth = (fake.requests, fake.tokens, len(reported) == len(sent))
            # Right: a valid answer; the requests it took, said; the output
            # tokens the provider reported, summed, or none said when none
            # was reported (0 is a claim); completeness, where it is said,
            # as it was.
            tokens_right = told[1] == truth[1] if reported else told[1] is None
            right = status == 200 and valid(answer) and told[0] == truth[0] and tokens_right \
                and told[2] in (None, truth[2])
            rows.append({"scenario": scenario, "status": status, "valid": status == 200 and valid(answer),
                         "told": told, "truth": truth, "right": right})
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return rows


def process_tree(pid):
    """`pid` and every live descendant, parents first."""
    todo = [pid]
    while todo:
        p = todo.pop()
        yield p
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            pass


def tree_cpu(pid):
    """CPU seconds of `pid` and every descendant."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def cpu_per_call(name, calls):
    fake = Fake(delay=0.02)
    proc, url, headers, model = start(name, fake.url)
    try:
        with ThreadPoolExecutor(200) as pool:
            list(pool.map(lambda _: call(url, headers, model), range(200)))  # warm up
            before = tree_cpu(proc.pid)
            started = time.time()
            results = list(pool.map(lambda _: call(url, headers, model), range(calls)))
            took = time.time() - started
            spent = tree_cpu(proc.pid) - before
        ok = sum(1 for s, _, a in results if s == 200 and valid(a))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {"cpu_ms_per_call": 1000 * spent / calls, "calls": calls, "ok": ok, "seconds": took}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    install()
    contenders = ["callai", "portkey", "litellm"]
    fake = Fake()
    report = {name: {"accounting": accounting(name, fake)} for name in contenders}
    calls = 400 if args.quick else 4000
    for name in contenders:
        report[name]["cpu"] = cpu_per_call(name, calls)
    (WORK / "report.json").write_text(json.dumps(report, indent=2))
    print(f"## Gateways, {time.strftime('%Y-%m-%d')}: accounting over {len(SCENARIOS)} retry scenarios, "
          f"CPU per call ({calls} structured calls, 200 in flight, fake answering after 20 ms)\n")
    print("| gateway | CPU per call | right | " + " | ".join(s for s, _ in SCENARIOS) + " |")
    print("|---|---|---|" + "---|" * len(SCENARIOS))
    for name in contenders:
        rows, cpu = report[name]["accounting"], report[name]["cpu"]
        cells = []
        for r in rows:
            (count, tokens, complete), (real, real_tokens, _) = r["told"], r["truth"]
            said = f"{count if count is not None else '?'} req / {tokens if tokens is not None else '-'} tok"
            cells.append(f"{'ok' if r['right'] else 'wrong'}: said {said}, was {real} / {real_tokens}"
                         + ("" if r["valid"] else f", answer {r['status']} invalid"))
        right = sum(r["right"] for r in rows)
        print(f"| {name} | {cpu['cpu_ms_per_call']:.2f} ms | {right}/{len(rows)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
