#!/usr/bin/env bash
# User-space instructions per `callai serve` call, /v1/call against
# /v1/chat/completions on the same serve: callgrind counts instructions,
# not seconds, so the figures repeat whatever else the machine is doing.
# One serve under `valgrind --tool=callgrind` (built with symbols, the
# `release-debug` profile), a loopback fake that answers at once, a warm-up
# of each endpoint, then ROUNDS rounds of CALLS structured calls of each,
# one in flight, the counters zeroed before each endpoint and dumped after.
#
#   bench/profile/instructions.sh 300
#   callgrind_annotate <target>/profile/instructions/callgrind.out.<pid>.<n>
#
# Dumps 1, 3, … are /v1/call's, 2, 4, … the drop-in's. CALLAI_BIN=PATH
# counts another build. The pack runtime's memory pool is sized for one run
# (maxConcurrentRuns = 1): valgrind cannot reserve the default pool's
# address space, and no pack runs here. Network: 127.0.0.1 only.
set -euo pipefail
calls=${1:-300}; rounds=${ROUNDS:-2}
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/profile/instructions
rm -rf "$out" && mkdir -p "$out"
(cd "$root" && cargo build --locked --profile release-debug -p callai-cli --bin callai &&
  cargo build --locked --release -p callai-bench --bin fake-openai --bin load)
# shellcheck source=fake.sh
. "$root/bench/profile/fake.sh"
start_fake 0
trap 'kill $fake 2>/dev/null || true' EXIT
serve_port=$(free_port)
serve_config "$out/serve.toml" 1
FAKE_KEY=sk-fake valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out.%p" \
  "${CALLAI_BIN:-$target/release-debug/callai}" serve --config "$out/serve.toml" \
  --listen "127.0.0.1:$serve_port" >"$out/serve.log" 2>&1 &
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$serve_port/healthz" >/dev/null && break; sleep 0.5; done
serve=$(pgrep -f -n "callgrind.*serve --config $out/serve.toml")
load() { "$target/release/load" --url "http://127.0.0.1:$serve_port$1" --body "$2" --calls "$3" --concurrency 1; }
load /v1/call "$CALL_BODY" 200 >/dev/null
load /v1/chat/completions "$CHAT_BODY" 200 >/dev/null
for _ in $(seq "$rounds"); do
  for endpoint in call chat; do
    callgrind_control -z "$serve" >/dev/null 2>&1
    if [ $endpoint = call ]; then load /v1/call "$CALL_BODY" "$calls"; else load /v1/chat/completions "$CHAT_BODY" "$calls"; fi |
      python3 -c 'import json,sys; r=json.load(sys.stdin); sys.exit(r["failures"] != 0)'
    callgrind_control -d "$endpoint" "$serve" >/dev/null 2>&1
  done
done
kill -INT "$serve"
wait "$serve" || true
for dump in "$out"/callgrind.out.*.[0-9]*; do
  n=${dump##*.}
  endpoint=$([ $((n % 2)) = 1 ] && echo "/v1/call" || echo "/v1/chat/completions")
  total=$(grep -m1 '^summary:' "$dump" | cut -d' ' -f2)
  echo "$endpoint: $((total / calls)) instructions a call (dump $n)"
done
