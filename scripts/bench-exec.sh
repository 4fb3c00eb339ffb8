#!/usr/bin/env bash
# Whole-process benchmark: `dsh exec` on a one-tool scenario against the local replay server.
# Prints wall time and peak RSS per run, then the medians. Usage:
#   scripts/bench-exec.sh [SCENARIO_DIR] [RUNS]
# Builds release binaries first. The replay server is restarted for every run (a scenario's
# entries are consumed), and only the dsh process is measured.
set -euo pipefail
cd "$(dirname "$0")/.."
scenario="${1:-../shared/conformance/acp/bash-tool-turn}"
runs="${2:-20}"
# BENCH_BIN_DIR: a directory holding already built `dsh` and `dsh-mock-llm` (skips the build).
if [ -n "${BENCH_BIN_DIR:-}" ]; then
  bin=$(cd "$BENCH_BIN_DIR" && pwd)
else
  cargo build --release --locked -q -p dsh -p dsh-testkit
  bin=$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)
fi
task=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sessions"][0]["first_user_text"])' "$scenario/scenario.json")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Recorded scenarios script only the main route: the session-title side request a new session
# makes would find no entry (and fail the run), so titles are off.
printf '[plugins.sandbox]\nmode = "danger-full-access"\n[plugins.spill]\nmax_inline_bytes = 0\n[plugins.session-title]\nenabled = false\n' > "$work/config.toml"
times=()
rss=()
for i in $(seq "$runs"); do
  ws="$work/ws-$i"; mkdir -p "$ws"
  "$bin/dsh-mock-llm" --scenario "$scenario" --workspace "$ws" > "$work/mock.out" 2>/dev/null &
  mock=$!
  for _ in $(seq 500); do grep -q listening "$work/mock.out" 2>/dev/null && break; sleep 0.02; done
  url=$(head -1 "$work/mock.out" | awk '{print $3}')
  # An empty URL would silently fall back to the real API (and its retries).
  [ -n "$url" ] || { echo "replay server did not start" >&2; exit 1; }
  # Wall time in ms from bash's clock (`time -f %e` only has 10 ms resolution); it includes
  # /usr/bin/time's own fork+exec, about 1 ms.
  start=$EPOCHREALTIME
  ( cd "$ws" && DSH_HOME="$work" DEEPSEEK_BASE_URL="$url" DEEPSEEK_API_KEY=bench \
      /usr/bin/time -f "%M" -o "$work/time" "$bin/dsh" exec "$task" > /dev/null )
  end=$EPOCHREALTIME
  t=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", (b - a) * 1000}')
  read -r m < "$work/time"
  times+=("$t"); rss+=("$m")
  kill "$mock" 2>/dev/null; wait "$mock" 2>/dev/null || true
  echo "run $i: ${t} ms wall, ${m} KiB peak RSS"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "median wall: $(median "${times[@]}") ms; median peak RSS: $(median "${rss[@]}") KiB"
