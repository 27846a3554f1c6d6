#!/usr/bin/env bash
# Profiles `callai serve` under load: a loopback fake provider (20 ms), a
# serve built with symbols (`--profile release-debug`), CALLS structured
# /v1/call calls with CONCURRENCY in flight, recorded by perf or heaptrack.
#
#   bench/profile/serve.sh perf 50 6000       # then: python3 bench/profile/categories.py <target>/profile/perf.data
#   bench/profile/serve.sh heaptrack 50 2000  # then: python3 bench/profile/allocations.py <target>/profile/heaptrack.zst 3000
#   bench/profile/allocations.sh 50 2000      # allocations per call, start-up and warm-up taken out
#
# URLPATH=/v1/chat/completions and BODY='{...}' profile another endpoint;
# CALLAI_BIN=PATH another build of callai; EXTRA_TOML='...' adds lines to
# its config (a run log: EXTRA_TOML=$'[runlog]\nurl = "/tmp/runs.db"').
# FAKE_DELAY_MS=2000 holds calls in flight longer (memory at the peak).
# FLOOR=1 profiles the floor instead (`callai-bench`'s hyper pass-through,
# the same fake behind it) under the same load, the same call as an OpenAI
# request to /v1/chat/completions (BODY defaults to it):
#
#   FLOOR=1 bench/profile/serve.sh perf 50 6000
# Network: 127.0.0.1 only.
set -euo pipefail
tool=${1:?perf or heaptrack}; concurrency=${2:-50}; calls=${3:-6000}
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/profile
mkdir -p "$out"
# heaptrack sees only malloc: its build of callai is on the system allocator
# (--no-default-features), as mimalloc's allocations never reach malloc.
features=()
[ "$tool" = heaptrack ] && features=(--no-default-features)
(cd "$root" && cargo build --locked --profile release-debug -p callai-cli --bin callai "${features[@]}" &&
  cargo build --locked --release -p callai-bench --bin fake-openai --bin load)
if [ -n "${FLOOR:-}" ]; then
  (cd "$root" && cargo build --locked --profile release-debug -p callai-bench --bin passthrough)
fi
# shellcheck source=fake.sh
. "$root/bench/profile/fake.sh"
start_fake "${FAKE_DELAY_MS:-20}"
serve_port=$(free_port)
serve_config "$out/serve.toml" 1000 "${EXTRA_TOML:-}"
wrap=()
[ "$tool" = heaptrack ] && wrap=(heaptrack -o "$out/heaptrack${HEAPTRACK_SUFFIX:-}")
# CALLAI_BIN: another build of callai to profile (its sites are named only
# if it has symbols).
if [ -n "${FLOOR:-}" ]; then
  "${wrap[@]}" "$target/release-debug/passthrough" --port "$serve_port" --upstream "http://127.0.0.1:$fake_port" \
    >"$out/serve.log" 2>&1 &
  for _ in $(seq 100); do grep -q listening "$out/serve.log" && break; sleep 0.2; done
  serve=$(pgrep -f -n "passthrough --port $serve_port")
  body=${BODY:-$CHAT_BODY}
  url="http://127.0.0.1:$serve_port${URLPATH:-/v1/chat/completions}"
else
  FAKE_KEY=sk-fake "${wrap[@]}" "${CALLAI_BIN:-$target/release-debug/callai}" serve --config "$out/serve.toml" \
    --listen "127.0.0.1:$serve_port" >"$out/serve.log" 2>&1 &
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$serve_port/healthz" >/dev/null && break; sleep 0.2; done
  serve=$(pgrep -f -n "callai serve --config $out/serve.toml")
  body=${BODY:-$CALL_BODY}
  url="http://127.0.0.1:$serve_port${URLPATH:-/v1/call}"
fi
# Warm-up: connections, caches, lazily built state (WARMUP calls).
"$target/release/load" --url "$url" --body "$body" --calls "${WARMUP:-1000}" --concurrency "$concurrency" >/dev/null
if [ "$tool" = perf ]; then
  perf record -F 1999 -g -o "$out/perf.data" -p "$serve" 2>/dev/null >/dev/null &
  recorder=$!
  sleep 0.3
fi
"$target/release/load" --url "$url" --body "$body" --calls "$calls" --concurrency "$concurrency"
if [ "$tool" = perf ]; then kill -INT "$recorder"; wait "$recorder" || true; fi
# serve stops on SIGINT (and writes its heaptrack); the floor, started in
# the background of a script, ignores it.
if [ -n "${FLOOR:-}" ]; then kill "$serve"; else kill -INT "$serve"; fi
wait "$serve" 2>/dev/null || true
kill "$fake"; wait "$fake" 2>/dev/null || true
ls -1 "$out"/perf.data "$out"/heaptrack*.zst 2>/dev/null || true
