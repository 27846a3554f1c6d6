# Sourced by serve.sh and instructions.sh (needs $target): a loopback fake
# OpenAI provider, the config of a `serve` that calls it, and the one
# structured call both profile, as a /v1/call body and as the same call to
# /v1/chat/completions. Network: 127.0.0.1 only.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_fake DELAY_MS: the fake on a free port, answering after DELAY_MS;
# sets fake_port, and fake to its pid.
start_fake() {
  fake_port=$(free_port)
  "$target/release/fake-openai" --port "$fake_port" --delay-ms "$1" 2>/dev/null &
  fake=$!
}

# serve_config FILE MAX_RUNS [EXTRA]: a config whose default provider is the
# fake, with MAX_RUNS as maxConcurrentRuns and EXTRA's lines after.
serve_config() {
  cat > "$1" <<TOML
[providers.fake]
kind = "openai"
baseUrl = "http://127.0.0.1:$fake_port/v1"
apiKeyEnv = "FAKE_KEY"
model = "fake"
[defaults]
provider = "fake"
[limits]
maxConcurrentRuns = $2
${3:-}
TOML
}

CALL_BODY='{"request":{"messages":[{"role":"user","content":"Write one sentence of a scene."}],"maxTokens":200,"responseSchema":{"type":"object","properties":{"scene":{"type":"string"}},"required":["scene"]}}}'
CHAT_BODY='{"model":"fake","max_tokens":200,"messages":[{"role":"user","content":"Write one sentence of a scene."}],"response_format":{"type":"json_schema","json_schema":{"name":"scene","schema":{"type":"object","properties":{"scene":{"type":"string"}},"required":["scene"]}}}}'
