"""The published Python SDK (deepseek-harness-sdk 0.2.1rc2) driving the real dsh binary.

Run by crates/cli/tests/sdk_python.rs with the replay model server's URL; prints one line per
check and exits non-zero at the first failure.
"""

import os
import sys

from deepseek_harness import DeepSeekHarness, DeepSeekHarnessConfig
from deepseek_harness.errors import JsonRpcError

DSH = os.environ["SDK_TEST_DSH"]
HOME = os.environ["SDK_TEST_HOME"]
WORK = os.environ["SDK_TEST_WORK"]
URL = os.environ["SDK_TEST_URL"]


def config(**extra):
    return DeepSeekHarnessConfig(
        dsh_bin=DSH, dsh_home=HOME, cwd=WORK, base_url=URL, api_key="replay-key", **extra
    )


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if fields[1] == str(pid):
            found.append(int(entry))
    return found


def check(name, condition, detail=""):
    if not condition:
        print(f"FAIL {name}: {detail}", flush=True)
        sys.exit(1)
    print(f"ok {name}", flush=True)


harness = DeepSeekHarness(config())
# One-shot run with a tool call.
result = harness.run("List the marker.")
check("one-shot answer", result.final_response == "The marker is SDK-MARKER.", result.final_response)
check("finish reason", result.finish_reason == "completed", result.finish_reason)
calls = [e for e in result.events if e.get("type") == "tool/call"]
check("the tool call among the events", calls and calls[0]["data"]["name"] == "bash", calls)

# A two-prompt session.
session = harness.start_session("session-two")
first = session.run("First of two.")
second = session.run("Second of two.")
check("two prompts", (first.final_response, second.final_response) == ("One.", "Two."),
      (first.final_response, second.final_response))
check("working directory", session.get_working_directory() == os.path.realpath(WORK),
      session.get_working_directory())

# A subagent whose notifications reach the client.
delegated = harness.run("Delegate the check.")
methods = [n.method for n in delegated.notifications]
started = [n for n in delegated.notifications if n.method == "subagent.started"]
finished = [n for n in delegated.notifications if n.method == "subagent.finished"]
check("subagent.started", len(started) == 1, methods)
child = started[0].payload["childSessionId"]
child_events = [n for n in delegated.notifications
                if n.method == "session.event" and n.payload["sessionId"] == child]
check("the child's events", child_events, methods)
check("subagent.finished", finished and finished[0].payload["status"] == "ok"
      and finished[0].payload["agentId"] == child, [n.payload for n in finished])
check("root events only", all(e is not None for e in delegated.events)
      and delegated.final_response == "PARENT_DONE", delegated.final_response)

# A failed model request: the turn ends in error, then idle.
failed = harness.run("This one fails.")
check("model failure", failed.finish_reason == "error", failed.finish_reason)

# close() leaves no process behind.
pid = harness.client._proc.pid
harness.close()
check("closed", not alive(pid), pid)
check("no leftover child", not children(pid), children(pid))

# A second runtime resumes the stored two-prompt session.
with DeepSeekHarness(config()) as again:
    resumed = again.resume_session("session-two")
    third = resumed.run("Third after resume.")
    check("resume", third.final_response == "Three.", third.final_response)
    starts = [e for e in third.events if e.get("type") == "turn/start"]
    check("resume continues the turns", starts and starts[0]["data"]["turn"] == 3, starts)
    try:
        again.resume_session("session-missing")
        check("resume of a missing session fails", False)
    except JsonRpcError as error:
        check("resume of a missing session fails", "session-missing" in error.message, error.message)

# A provider no adapter serves fails at initialize with the client's error type.
try:
    DeepSeekHarness(config(provider="no-such-provider")).run("never sent")
    check("unknown provider", False)
except JsonRpcError as error:
    check("unknown provider", "no-such-provider" in error.message, error.message)

print("published client: all checks passed", flush=True)
