#!/usr/bin/env python3
"""Scaling benchmark: N sequential bash calls in one `dsh exec` turn.

For each N (default 10, 50, 200, 800) and each sandbox mode (danger-full-access, i.e. no
sandbox, and workspace-write, i.e. bubblewrap), a fresh replay server (`dsh-mock-llm
--tool-loop N`) scripts a model that calls `bash` N times and then answers DONE; `dsh exec` runs
the whole session against it. Only the dsh process is measured: wall time from spawn to reap,
CPU (user + system, including the bash children dsh reaped) and peak RSS from wait4().

Prints one row per (mode, N, binary) with medians over RUNS runs, per-call wall and CPU, and the
ratio of per-call figures against N = the smallest N. With several --bin, the binaries run in
turn (A B A B ...) so that drift on a noisy machine hits them alike, and the last column is the
ratio of each binary's median per-call wall to the first binary's.

Usage:
  scripts/bench-scaling.py [--bin DSH]... [--mock DSH_MOCK_LLM] [--n 10,50,200,800]
                           [--runs 3] [--modes none,bwrap] [--command 'echo step-{i}'] [--json]

Without --bin it builds the release binaries (cargo build --release -p dsh -p dsh-testkit) and
uses $CARGO_TARGET_DIR/release (default target/release).
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

PROMPT = "Run the numbered commands one after another, then say DONE."
MODES = {
    "none": "danger-full-access",
    "bwrap": "workspace-write",
}


def build(repo):
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "-q", "-p", "dsh", "-p", "dsh-testkit"],
        cwd=repo,
        check=True,
    )
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(repo, "target"))
    return os.path.join(target, "release")


def start_mock(mock, n, command, workspace):
    proc = subprocess.Popen(
        [mock, "--tool-loop", str(n), "--command", command, "--workspace", workspace],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        sys.exit(f"replay server did not start: {line!r}")
    return proc, line.split()[2]


def run_once(dsh, mock, n, mode, command):
    work = tempfile.mkdtemp(prefix="dsh-scaling-")
    try:
        home = os.path.join(work, "home")
        ws = os.path.join(work, "ws")
        os.makedirs(home)
        os.makedirs(ws)
        with open(os.path.join(home, "config.toml"), "w") as f:
            f.write(f'[plugins.sandbox]\nmode = "{MODES[mode]}"\n')
        server, url = start_mock(mock, n, command, ws)
        env = dict(os.environ, DSH_HOME=home, DEEPSEEK_BASE_URL=url, DEEPSEEK_API_KEY="bench")
        try:
            start = time.perf_counter()
            child = Measured(
                [dsh, "exec", PROMPT],
                cwd=ws,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, err = child.communicate()
        finally:
            server.terminate()
            server.wait()
        wall = time.perf_counter() - start
        if child.returncode != 0 or out.strip() != b"DONE":
            sys.exit(f"dsh exec failed (N={n}, {mode}): rc={child.returncode} {err.decode()[-400:]}")
        return wall, child.rusage
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", action="append", default=[])
    parser.add_argument("--mock")
    parser.add_argument("--n", default="10,50,200,800")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default="none,bwrap")
    parser.add_argument("--command", default="echo step-{i}")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON lines too")
    args = parser.parse_args()

    release = None
    if not args.bin or not args.mock:
        release = build(repo)
    bins = args.bin or [os.path.join(release, "dsh")]
    mock = args.mock or os.path.join(release, "dsh-mock-llm")
    ns = [int(x) for x in args.n.split(",")]
    modes = args.modes.split(",")

    print(f"# {os.cpu_count()} CPUs; runs per point: {args.runs}; command: {args.command!r}")
    header = f"{'mode':6} {'N':>5} {'bin':>3}  {'wall ms':>9} {'cpu ms':>9} {'wall/call':>9} {'cpu/call':>9} {'rss MiB':>8}  {'wall x':>6} {'cpu x':>6} {'vs bin0':>7}"
    print(header)
    for mode in modes:
        base = {}
        for n in ns:
            samples = {b: [] for b in range(len(bins))}
            for _ in range(args.runs):
                for b, dsh in enumerate(bins):
                    wall, usage = run_once(dsh, mock, n, mode, args.command)
                    cpu = usage.ru_utime + usage.ru_stime
                    samples[b].append((wall, cpu, usage.ru_maxrss / 1024))
            first_wall = None
            for b in range(len(bins)):
                wall = statistics.median(s[0] for s in samples[b]) * 1000
                cpu = statistics.median(s[1] for s in samples[b]) * 1000
                rss = statistics.median(s[2] for s in samples[b])
                per_wall, per_cpu = wall / n, cpu / n
                base.setdefault(b, (per_wall, per_cpu))
                if first_wall is None:
                    first_wall = per_wall
                row = {
                    "mode": mode, "n": n, "bin": bins[b], "wall_ms": wall, "cpu_ms": cpu,
                    "wall_per_call_ms": per_wall, "cpu_per_call_ms": per_cpu, "peak_rss_mib": rss,
                    "wall_ratio": per_wall / base[b][0], "cpu_ratio": per_cpu / base[b][1],
                    "vs_bin0": per_wall / first_wall,
                }
                print(
                    f"{mode:6} {n:5} {b:>3}  {wall:9.1f} {cpu:9.1f} {per_wall:9.2f} {per_cpu:9.2f} {rss:8.1f}  "
                    f"{row['wall_ratio']:6.2f} {row['cpu_ratio']:6.2f} {row['vs_bin0']:7.2f}",
                    flush=True,
                )
                if args.json:
                    print(json.dumps(row), flush=True)
    for b, dsh in enumerate(bins):
        print(f"# bin {b}: {dsh}")


if __name__ == "__main__":
    main()
