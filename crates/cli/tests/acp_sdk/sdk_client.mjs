// Drives `dsh acp` with the official ACP TypeScript SDK's client and validates every frame,
// both ways, against the JSON schema the SDK ships (schema/v1/schema.json): the frame as an
// Agent or Client message, and its params or result against the method's own definition.
//
// Environment: DSH_BIN (the binary), WORK (the session folder), DSH_HOME, DEEPSEEK_BASE_URL
// (a model server the caller scripts: it answers the first prompt with text).
// Prints one JSON object: {"checks": [{"name", "ok", "detail"}], "invalid": [...], "frames": N}.

import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";
import Ajv2020 from "ajv/dist/2020.js";

const require = createRequire(import.meta.url);
const schema = require("@agentclientprotocol/sdk/schema/v1/schema.json");

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const work = env("WORK");

// ---- schema validation of every frame ------------------------------------------------------

// The schema's integer formats (uint32, int64, …) are range notes ajv does not know: not checked.
const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false });
ajv.addSchema(schema, "acp");
const frameOf = { agent: 0, client: 1 }; // top-level anyOf: [Agent, Client]
const byMethod = { agent: {}, client: {}, protocol: {} };
for (const [name, def] of Object.entries(schema.$defs)) {
  const method = def["x-method"];
  if (method) byMethod[def["x-side"]][`${method}:${name.replace(/^.*(Request|Response|Notification)$/, "$1")}`] = name;
}
const validators = new Map();
function validatorFor(ref) {
  if (!validators.has(ref)) validators.set(ref, ajv.compile({ $ref: `acp${ref}` }));
  return validators.get(ref);
}
const invalid = [];
const frames = [];
const pending = { agent: new Map(), client: new Map() }; // request id → method, per sender

function check(value, ref, what) {
  const validate = validatorFor(ref);
  if (!validate(value)) {
    invalid.push({ what, errors: validate.errors.slice(0, 5), value });
  }
}

/** `from` sent `frame`: "agent" (dsh) or "client" (this SDK). */
function validateFrame(from, frame) {
  frames.push({ from, frame });
  const to = from === "agent" ? "client" : "agent";
  check(frame, `#/anyOf/${frameOf[from]}`, `${from} frame`);
  if (frame.method !== undefined) {
    if (frame.id !== undefined) pending[from].set(JSON.stringify(frame.id), frame.method);
    const kind = frame.id !== undefined ? "Request" : "Notification";
    // A request is defined on the side that handles it; a protocol notification on neither.
    const side = frame.method.startsWith("$/") ? "protocol" : to;
    const name = byMethod[side][`${frame.method}:${kind}`];
    if (name) check(frame.params ?? {}, `#/$defs/${name}`, `${from} ${frame.method} params`);
    else invalid.push({ what: `${from} sent ${frame.method}, which the schema does not define`, value: frame });
  } else {
    const method = pending[to].get(JSON.stringify(frame.id));
    pending[to].delete(JSON.stringify(frame.id));
    if (frame.error !== undefined) {
      check(frame.error, "#/$defs/Error", `${from} error answer to ${method}`);
    } else if (method) {
      const name = byMethod[from][`${method}:Response`];
      if (name) check(frame.result, `#/$defs/${name}`, `${from} ${method} result`);
    }
  }
}

// ---- the agent process, with every line tapped --------------------------------------------

const child = spawn(env("DSH_BIN"), ["acp"], {
  cwd: work,
  env: {
    PATH: process.env.PATH,
    HOME: env("DSH_HOME"),
    DSH_HOME: env("DSH_HOME"),
    DEEPSEEK_BASE_URL: env("DEEPSEEK_BASE_URL"),
    DEEPSEEK_API_KEY: "test-key",
  },
  stdio: ["pipe", "pipe", "inherit"],
});

function tapLines(from) {
  let buffer = "";
  const decoder = new TextDecoder();
  return new TransformStream({
    transform(chunk, controller) {
      buffer += decoder.decode(chunk, { stream: true });
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        if (line.trim()) {
          try {
            validateFrame(from, JSON.parse(line));
          } catch (error) {
            invalid.push({ what: `${from} line is not JSON`, value: line, error: String(error) });
          }
        }
      }
      controller.enqueue(chunk);
    },
  });
}

const fromAgent = Readable.toWeb(child.stdout).pipeThrough(tapLines("agent"));
const toAgentTap = tapLines("client");
toAgentTap.readable.pipeTo(Writable.toWeb(child.stdin)).catch(() => {});
const stream = acp.ndJsonStream(toAgentTap.writable, fromAgent);

// ---- the flow ------------------------------------------------------------------------------

const checks = [];
function expect(name, ok, detail) {
  checks.push({ name, ok: Boolean(ok), detail: ok ? undefined : detail });
}
async function refused(promise) {
  try {
    return { result: await promise };
  } catch (error) {
    return { error };
  }
}
const updates = [];
const agentFramesFor = (sessionId) =>
  frames.filter((f) => f.from === "agent" && f.frame.params?.sessionId === sessionId);

const app = acp
  .client({ name: "dsh-acp-sdk-test" })
  .onNotification(acp.methods.client.session.update, (notification) => {
    updates.push(notification);
  })
  .onRequest(acp.methods.client.session.requestPermission, () => ({
    outcome: { outcome: "cancelled" },
  }));

await app.connectWith(stream, async (ctx) => {
  const agent = ctx.agent ?? ctx;
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { session: { configOptions: { boolean: {} } } },
  });
  const sessions = init.agentCapabilities?.sessionCapabilities ?? {};
  expect(
    "initialize advertises list, resume, close, delete, logout and embedded context",
    sessions.list && sessions.resume && sessions.close && sessions.delete &&
      init.agentCapabilities?.auth?.logout && init.agentCapabilities?.promptCapabilities?.embeddedContext,
    init,
  );

  const created = await agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
  const id = created.sessionId;
  const options = created.configOptions ?? [];
  expect("session/new offers the model select", options.some((o) => o.id === "model" && o.type === "select"), options);
  expect("session/new offers plan_mode as a boolean", options.some((o) => o.id === "plan_mode" && o.type === "boolean"), options);

  const answer = await agent.request(acp.methods.agent.session.prompt, {
    sessionId: id,
    prompt: [
      { type: "text", text: "read these" },
      { type: "resource", resource: { uri: `file://${work}/notes.md`, mimeType: "text/markdown", text: "NOTE BODY" } },
      { type: "resource_link", name: "notes.md", uri: `file://${work}/notes.md` },
    ],
  });
  expect("a prompt with an embedded resource and a link ends its turn", answer.stopReason === "end_turn", answer);
  // Read off the wire: the SDK may hand notifications to handlers after the answer.
  const chunks = agentFramesFor(id)
    .map((f) => f.frame.params.update)
    .filter((u) => u?.sessionUpdate === "agent_message_chunk");
  expect("message chunks carry a messageId", chunks.length > 0 && chunks.every((u) => typeof u.messageId === "string"), chunks);

  const set = await agent.request(acp.methods.agent.session.setConfigOption, {
    sessionId: id, configId: "plan_mode", type: "boolean", value: true,
  });
  expect("plan_mode switches on", set.configOptions.some((o) => o.id === "plan_mode" && o.currentValue === true), set);

  const closed = await agent.request(acp.methods.agent.session.close, { sessionId: id });
  expect("session/close answers", closed !== undefined, closed);

  const before = frames.length;
  const resumed = await agent.request(acp.methods.agent.session.resume, { sessionId: id, cwd: work, mcpServers: [] });
  expect("session/resume answers with the session's modes", resumed.modes?.currentModeId?.endsWith("+plan"), resumed);
  // Only the frames up to the answer count: the commands and usage the agent sends right after
  // it may already be recorded by the time this line runs.
  const asked = frames.findIndex((f, i) => i >= before && f.from === "client" && f.frame.method === "session/resume");
  const answered = frames.findIndex(
    (f, i) => i > asked && f.from === "agent" && f.frame.id === frames[asked].frame.id && f.frame.method === undefined,
  );
  const replayed = frames
    .slice(before, answered)
    .filter((f) => f.from === "agent" && f.frame.params?.sessionId === id && f.frame.method === "session/update");
  expect("session/resume found its request and answer frames", asked >= 0 && answered > asked, { asked, answered });
  expect("session/resume sends no update before its answer (no replay)", replayed.length === 0, replayed);

  const listed = await agent.request(acp.methods.agent.session.list, { cwd: work });
  expect("session/list shows the session", listed.sessions.some((s) => s.sessionId === id), listed);

  await agent.request(acp.methods.agent.session.delete, { sessionId: id });
  const after = await agent.request(acp.methods.agent.session.list, { cwd: work });
  expect("session/delete removes it from the list", !after.sessions.some((s) => s.sessionId === id), after);
  const reload = await refused(agent.request(acp.methods.agent.session.load, { sessionId: id, cwd: work, mcpServers: [] }));
  expect("a deleted session does not load", reload.error !== undefined, reload);

  await agent.request(acp.methods.agent.logout, {});
  const loggedOut = await refused(agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] }));
  expect("after logout, session/new asks for authentication", loggedOut.error?.code === -32000, loggedOut);
  await agent.request(acp.methods.agent.authenticate, { methodId: init.authMethods[0].id });
  const again = await agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
  expect("authenticate opens sessions again", typeof again.sessionId === "string", again);
});

child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
process.stdout.write(`${JSON.stringify({ checks, invalid, frames: frames.length })}\n`);
