"""SDK runtime start-up and per-prompt overhead: dsh --profile sdk against upstream's bundled runtime.

Usage: VENV/bin/python scripts/bench-sdk.py DSH_BIN UPSTREAM_BIN ROUNDS PROMPTS

Both runtimes are driven by the published Python client (deepseek-harness-sdk) against one
loopback model stub that answers every request at once with "ok" (OpenAI chat SSE for dsh,
Anthropic Messages SSE for upstream, which posts /v1/messages), each in a fresh home. Start-up
is launch -> initialize answered; per prompt is Session.run() (receipt to idle) minus nothing,
the first prompt of each runtime excluded. Rounds alternate the two runtimes.
"""
import json, os, sys, tempfile, threading, time, statistics
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from deepseek_harness import DeepSeekHarness, DeepSeekHarnessConfig

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        n = int(self.headers.get("content-length", 0)); self.rfile.read(n)
        def chunk(delta, finish=None):
            return "data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **({"usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}} if finish else {})}) + "\n\n"
        body = (chunk({"role": "assistant", "content": "ok"}) + chunk({}, "stop") + "data: [DONE]\n\n").encode()
        if self.path.endswith("/messages"):
            def ev(t, d): return f"event: {t}\ndata: " + json.dumps({"type": t, **d}) + "\n\n"
            body = (ev("message_start", {"message": {"id": "m1", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 0}}})
                + ev("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
                + ev("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "ok"}})
                + ev("content_block_stop", {"index": 0})
                + ev("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 1}})
                + ev("message_stop", {})).encode()
        self.send_response(200); self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body))); self.send_header("connection", "close"); self.end_headers()
        self.wfile.write(body)

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{srv.server_port}"
bins = {"dsh": sys.argv[1], "upstream": sys.argv[2]}
ROUNDS, PROMPTS = int(sys.argv[3]), int(sys.argv[4])
res = {k: {"start": [], "prompt": []} for k in bins}
for r in range(ROUNDS):
    for name, b in bins.items():
        home = tempfile.mkdtemp(); work = tempfile.mkdtemp()
        if name == "dsh":
            open(os.path.join(home, "config.toml"), "w").write("[plugins.session-title]\nenabled = false\n")
        h = DeepSeekHarness(DeepSeekHarnessConfig(dsh_bin=b, dsh_home=home, cwd=work, base_url=url, api_key="bench-key"))
        t = time.perf_counter(); h.start(); res[name]["start"].append(time.perf_counter() - t)
        s = h.start_session()
        for i in range(PROMPTS):
            t = time.perf_counter(); out = s.run(f"prompt {i}"); dt = time.perf_counter() - t
            if i > 0: res[name]["prompt"].append(dt)
            if out.final_response != "ok": print(name, "unexpected", out.final_response, out.finish_reason, [e["data"] for e in out.events if e.get("type") in ("turn/end","llm/retry")][-1:], file=sys.stderr)
        h.close()
for name, v in res.items():
    print(f"{name}: start median {statistics.median(v['start'])*1000:.0f} ms (min {min(v['start'])*1000:.0f}), "
          f"prompt median {statistics.median(v['prompt'])*1000:.1f} ms (min {min(v['prompt'])*1000:.1f}) over {len(v['start'])} starts / {len(v['prompt'])} prompts")
