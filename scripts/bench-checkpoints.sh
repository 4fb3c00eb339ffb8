#!/usr/bin/env bash
# Checkpoint cost on a 100,000-file tree with a 10-file change per step (docs/benchmarks.md).
# Usage: scripts/bench-checkpoints.sh [FILES] [STEPS] [CHANGED]   (PROFILE=release for -r)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=()
if [[ "${PROFILE:-debug}" == release ]]; then profile=(--release); fi
exec cargo run -q "${profile[@]}" -p dsh-checkpoints --example checkpoint_bench -- "${1:-100000}" "${2:-50}" "${3:-10}"
