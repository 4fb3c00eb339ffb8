#!/usr/bin/env bash
# Load test of `dsh web` (crates/web/examples/bench-web.rs): 50 sessions at once, each one
# 200-step replayed turn, 4 WebSocket viewers each; then the same with one stalled viewer per
# session. Release build. Figures go in docs/benchmarks.md ("dsh web under load").
set -euo pipefail
cd "$(dirname "$0")/.."
sessions="${SESSIONS:-50}"; steps="${STEPS:-200}"; viewers="${VIEWERS:-4}"
cargo build -q --release -p dsh-web --example bench-web
bin="${CARGO_TARGET_DIR:-target}/release/examples/bench-web"
echo "== $sessions sessions x $steps steps, $viewers viewers each"
"$bin" --sessions "$sessions" --steps "$steps" --viewers "$viewers"
echo "== the same, plus one stalled viewer per session"
"$bin" --sessions "$sessions" --steps "$steps" --viewers "$viewers" --stalled 1
