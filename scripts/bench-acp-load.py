#!/usr/bin/env python3
"""ACP `session/load` of a large stored session through the real `dsh acp`.

Writes one loop-shaped log of EVENTS events (the shape of `crates/session/benches/load.rs`:
turns of a prompt, 90 streamed chunks and one answer) into a fresh DSH_HOME, then for each
binary (alternating, RUNS times) starts `dsh acp`, sends `initialize` and `session/load`, and
reads stdout until the load's response. Reports per binary the medians of: wall time from the
load request to its response, the `session/update` notifications and the bytes written before
it, the number of reads it took (a proxy for writes: one read returns what one or more writes
put in the pipe), and the process's peak RSS and CPU (from wait4, after stdin closes).

Usage:
  scripts/bench-acp-load.py --bin OLD/dsh --bin NEW/dsh [--events 100000] [--runs 3] [--json]
"""

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from measured import Measured  # scripts/measured.py

SESSION = "0196f1c2-0000-7000-8000-00000000b16b"


def write_log(home, cwd, events):
    """The load bench's log: returns its path and size."""
    lines = [json.dumps({"type": "session", "version": 0, "id": SESSION, "createdAt": 1,
                         "delegationDepth": 0, "cwd": cwd}, separators=(",", ":"))]
    s, turn = 0, 0
    while s < events:
        turn += 1
        lines.append(f'{{"type":"turn/start","seq":{s},"time":{s},"data":{{"turn":{turn}}}}}')
        s += 1
        lines.append(f'{{"type":"step/start","seq":{s},"time":{s},"data":{{"turn":{turn},"step":1}}}}')
        s += 1
        lines.append(f'{{"type":"user/message","seq":{s},"time":{s},"data":{{"content":[{{"type":"text","text":"go on"}}],"source":{{"kind":"user"}},"role":"user","id":"u{turn}"}},"surfaceOp":"append"}}')
        s += 1
        first = s
        for _ in range(90):
            lines.append(f'{{"type":"assistant/chunk","seq":{s},"time":{s},"data":{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"some streamed words "}}}}}}')
            s += 1
        sources = ",".join(str(x) for x in range(first, s))
        lines.append(f'{{"type":"assistant/message","seq":{s},"time":{s},"data":{{"turn":{turn},"step":1,"message":{{"role":"assistant","content":[{{"type":"text","text":"words"}}],"source":{{"kind":"model","provider":"p","model":"m"}},"id":"a{turn}"}}}},"sourceEventSeqs":[{sources}],"surfaceOp":"append"}}')
        s += 1
        lines.append(f'{{"type":"step/end","seq":{s},"time":{s},"data":{{"turn":{turn},"step":1}}}}')
        s += 1
        lines.append(f'{{"type":"turn/end","seq":{s},"time":{s},"data":{{"turn":{turn},"reason":{{"kind":"completed"}}}}}}')
        s += 1
    directory = os.path.join(home, "sessions", "bench", SESSION)
    os.makedirs(directory)
    path = os.path.join(directory, "session.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path, os.path.getsize(path), s


def send(proc, message):
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def read_until(proc, want_id, buf, counts, deadline):
    """Reads stdout until the response with `want_id`; counts updates, bytes and reads."""
    fd = proc.stdout.fileno()
    while True:
        while b"\n" in buf[0]:
            line, buf[0] = buf[0].split(b"\n", 1)
            counts["bytes"] += len(line) + 1
            message = json.loads(line)
            if message.get("method") == "session/update":
                counts["updates"] += 1
            if message.get("id") == want_id and "method" not in message:
                return message
        if time.monotonic() > deadline:
            sys.exit(f"no response {want_id} in time")
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                sys.exit(f"dsh acp closed stdout before response {want_id}")
            counts["reads"] += 1
            buf[0] += chunk


def run_once(dsh, home, cwd):
    env = dict(os.environ, DSH_HOME=home, DEEPSEEK_API_KEY="bench",
               DEEPSEEK_BASE_URL="http://127.0.0.1:9")
    proc = Measured([dsh, "acp"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    buf = [b""]
    deadline = time.monotonic() + 120
    send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    read_until(proc, 1, buf, {"bytes": 0, "updates": 0, "reads": 0}, deadline)
    counts = {"bytes": 0, "updates": 0, "reads": 0}
    start = time.perf_counter()
    send(proc, {"jsonrpc": "2.0", "id": 2, "method": "session/load",
                "params": {"sessionId": SESSION, "cwd": cwd, "mcpServers": []}})
    response = read_until(proc, 2, buf, counts, deadline)
    wall = time.perf_counter() - start
    if "error" in response:
        sys.exit(f"session/load failed: {response}")
    proc.stdin.close()
    proc.wait(timeout=60)
    usage = proc.rusage
    return {
        "wall_ms": wall * 1000,
        "updates": counts["updates"],
        "bytes": counts["bytes"],
        "reads": counts["reads"],
        "rss_mib": usage.ru_maxrss / 1024,
        "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", action="append", required=True)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="dsh-acp-load-")
    try:
        home = os.path.join(work, "home")
        cwd = os.path.join(work, "ws")
        os.makedirs(home)
        os.makedirs(cwd)
        with open(os.path.join(home, "config.toml"), "w") as f:
            f.write("[plugins.session-title]\nenabled = false\n")
        path, size, events = write_log(home, cwd, args.events)
        pristine = open(path, "rb").read()
        print(f"# log: {events} events, {size / 2**20:.1f} MiB; runs per binary: {args.runs}")
        samples = {b: [] for b in range(len(args.bin))}
        for _ in range(args.runs):
            for b, dsh in enumerate(args.bin):
                # Each run loads the same bytes (a load may append its end-seed marker).
                with open(path, "wb") as f:
                    f.write(pristine)
                samples[b].append(run_once(dsh, home, cwd))
        print(f"{'bin':>3} {'load ms':>9} {'cpu ms':>9} {'updates':>8} {'MiB out':>8} {'reads':>6} {'rss MiB':>8}")
        for b, dsh in enumerate(args.bin):
            med = {k: statistics.median(s[k] for s in samples[b]) for k in samples[b][0]}
            print(f"{b:>3} {med['wall_ms']:9.1f} {med['cpu_ms']:9.1f} {med['updates']:8.0f} "
                  f"{med['bytes'] / 2**20:8.2f} {med['reads']:6.0f} {med['rss_mib']:8.1f}")
            if args.json:
                print(json.dumps({"bin": dsh, "runs": samples[b], "median": med}))
        for b, dsh in enumerate(args.bin):
            print(f"# bin {b}: {dsh}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
