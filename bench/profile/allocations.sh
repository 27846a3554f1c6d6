#!/usr/bin/env bash
# Allocations per `callai serve` call, with start-up and warm-up taken out:
# two heaptrack runs of serve.sh, CALLS and 2*CALLS measured calls after
# the same warm-up, and the difference of their totals over CALLS; then the
# sites of the longer run, per call made (warm-up included, so a site's
# figure is a little under its steady state).
#
#   bench/profile/allocations.sh 50 2000
#
# URLPATH and BODY as for serve.sh. Network: 127.0.0.1 only.
set -euo pipefail
concurrency=${1:-50}; calls=${2:-2000}
here=$(cd "$(dirname "$0")" && pwd)
target=${CARGO_TARGET_DIR:-$here/../../target}
warmup=${WARMUP:-1000}
rm -f "$target"/profile/heaptrack-short*.zst "$target"/profile/heaptrack-long*.zst
WARMUP=$warmup HEAPTRACK_SUFFIX=-short "$here/serve.sh" heaptrack "$concurrency" "$calls" >/dev/null
WARMUP=$warmup HEAPTRACK_SUFFIX=-long "$here/serve.sh" heaptrack "$concurrency" $((2 * calls)) >/dev/null
short=$(ls "$target"/profile/heaptrack-short*.zst)
long=$(ls "$target"/profile/heaptrack-long*.zst)
python3 "$here/allocations.py" "$long" $((warmup + 2 * calls)) --minus "$short" "$calls"
