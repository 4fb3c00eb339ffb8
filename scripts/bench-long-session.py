#!/usr/bin/env python3
"""Long-session benchmark: one `dsh exec` turn of STEPS tool calls with large results against a
small context window, then a resumed turn after the last checkpoint.

The model is `dsh-long-session-llm`: every step it calls `bash` with a command that prints
RESULT_BYTES bytes, it answers compaction requests (`x-deepseek-harness-compact: 1`) with a
short summary, and it refuses any request estimated above WINDOW tokens as
`context_length_exceeded`, as a provider would. dsh is configured with the same window, so
compaction (pressure before each step, recovery after a refusal) has to keep the session going.

What it reports:
- the run: exit status, steps, compactions (`compaction/summary`), failed attempts, prunes,
  refusals served, wall time, peak RSS (wait4);
- per-step harness overhead: the model-side gap between the end of one response and the next
  step request (tool run included), median over the steps whose request was made when the log
  held about 100, 1 000 and 10 000 events (+-10 %), excluding steps that compacted;
- resume: `dsh exec --resume <id>` continues after the last checkpoint (the first request of
  the resumed turn starts with the checkpoint).

Usage:
  scripts/bench-long-session.py [--bin DSH] [--mock DSH_LONG_SESSION_LLM] [--steps 2000]
                                [--result-bytes 20000] [--window 32000] [--json]
Without --bin/--mock it builds the release binaries and uses $CARGO_TARGET_DIR/release.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from measured import Measured  # scripts/measured.py

PROMPT = "Run the numbered commands one after another until told to stop, then say DONE."
PREAMBLE = "This is an automatically generated checkpoint"


def build(repo):
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "-q", "-p", "dsh", "-p", "dsh-testkit"],
        cwd=repo,
        check=True,
    )
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(repo, "target"))
    return os.path.join(target, "release")


def start_mock(mock, steps, result_bytes, window, report):
    proc = subprocess.Popen(
        [mock, "--steps", str(steps), "--result-bytes", str(result_bytes),
         "--context-window", str(window), "--report", report],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        sys.exit(f"model server did not start: {line!r}")
    return proc, line.split()[2]


def config(window):
    return "\n".join([
        "[plugins.sandbox]", 'mode = "danger-full-access"', "",
        "[plugins.session-title]", "enabled = false", "",
        "[[model.catalog]]", 'id = "deepseek-v4-flash"', f"context_window = {window}", "",
    ]) + "\n"


def session_log(home, session_id):
    for root, _dirs, files in os.walk(os.path.join(home, "sessions")):
        if "session.jsonl" in files:
            with open(os.path.join(root, "session.jsonl")) as f:
                lines = [json.loads(line) for line in f if line.strip()]
            if lines and lines[0].get("id") == session_id:
                return lines[1:]
    sys.exit(f"no log for session {session_id}")


def run(dsh, args, cwd, env):
    start = time.perf_counter()
    child = Measured(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = child.communicate()
    return child, out.decode(), err.decode(), time.perf_counter() - start


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin")
    parser.add_argument("--mock")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--result-bytes", type=int, default=20000)
    parser.add_argument("--window", type=int, default=32000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    release = None
    if not args.bin or not args.mock:
        release = build(repo)
    dsh = args.bin or os.path.join(release, "dsh")
    mock = args.mock or os.path.join(release, "dsh-long-session-llm")

    work = tempfile.mkdtemp(prefix="dsh-long-session-")
    try:
        home, ws = os.path.join(work, "home"), os.path.join(work, "ws")
        os.makedirs(home)
        os.makedirs(ws)
        with open(os.path.join(home, "config.toml"), "w") as f:
            f.write(config(args.window))
        report = os.path.join(work, "served.jsonl")
        server, url = start_mock(mock, args.steps, args.result_bytes, args.window, report)
        env = dict(os.environ, DSH_HOME=home, DEEPSEEK_BASE_URL=url, DEEPSEEK_API_KEY="bench")
        try:
            child, out, err, wall = run(dsh, [dsh, "exec", "--output", "stream-json", PROMPT], ws, env)
            lines = [json.loads(l) for l in out.splitlines() if l.strip()]
            result = next((l for l in lines if l.get("type") == "result"), None)
            if child.returncode != 0 or result is None or result.get("output") != "DONE":
                sys.exit(f"dsh exec failed: rc={child.returncode} {err[-800:]}")
            session_id = result["sessionId"]
            resumed, rout, rerr, rwall = run(
                dsh, [dsh, "exec", "--resume", session_id, "--output", "stream-json", "Anything left?"], ws, env)
        finally:
            server.terminate()
            server.wait()
        served = [json.loads(l) for l in open(report)]
        events = session_log(home, session_id)
        kinds = [e["type"] for e in events]
        step_starts = [e["seq"] for e in events if e["type"] == "step/start"]
        steps = [s for s in served if s["kind"] == "step"]
        # A step compacted when a compaction request came right before its request.
        compacted = set()
        for i, s in enumerate(served):
            if s["kind"] == "step" and i > 0 and served[i - 1]["kind"] in ("compaction", "overflow"):
                compacted.add(s["index"])
        buckets = {}
        for target in (100, 1000, 10000):
            gaps = [
                s["gap_ms"] for n, s in enumerate(steps)
                if n < len(step_starts) and s["gap_ms"] is not None and s["index"] not in compacted
                and abs(step_starts[n] - target) <= target * 0.1
            ]
            buckets[target] = (statistics.median(gaps), len(gaps)) if gaps else (None, 0)
        row = {
            "steps": len(steps) - 1,
            "events": len(events),
            "compactions": kinds.count("compaction/summary"),
            "failed_attempts": sum(1 for e in events if e["type"] == "compaction/end" and "error" in e["data"]),
            "prunes": kinds.count("compaction/prune"),
            "refusals_served": sum(1 for s in served if s["kind"] == "overflow"),
            "wall_s": wall,
            "peak_rss_mib": child.rusage.ru_maxrss / 1024 if child.rusage else None,
            "gap_ms_at_100": buckets[100][0], "gap_ms_at_1000": buckets[1000][0],
            "gap_ms_at_10000": buckets[10000][0],
            "resume_ok": resumed.returncode == 0,
            "resume_wall_s": rwall,
        }
        resumed_events = [json.loads(l) for l in rout.splitlines() if l.strip()]
        row["resume_output"] = next((l.get("output") for l in resumed_events if l.get("type") == "result"), None)
        last_request = [s for s in served if s["kind"] == "step"][-1]
        row["resume_starts_with_checkpoint"] = last_request["first_text"].startswith(PREAMBLE)
        print(f"# {os.cpu_count()} CPUs; steps {args.steps}, result {args.result_bytes} B, window {args.window} tokens")
        for key, value in row.items():
            print(f"{key:32} {value}")
        for target in (100, 1000, 10000):
            print(f"# gap samples at ~{target} events: {buckets[target][1]}")
        if args.json:
            print(json.dumps(row))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
