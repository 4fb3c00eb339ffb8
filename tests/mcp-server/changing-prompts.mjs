// A stdio MCP server whose prompt list changes at run time, for the dsh-mcp tests of
// `notifications/prompts/list_changed` (the reference server never changes its prompts).
// Tools: `add-prompt {name, description?}` and `remove-prompt {name}`; each change is
// announced with `notifications/prompts/list_changed`.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListToolsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const prompts = new Map([["first", "The first prompt"]]);

const server = new Server(
  { name: "changing-prompts", version: "1.0.0" },
  { capabilities: { tools: {}, prompts: { listChanged: true } } },
);

server.setRequestHandler(ListPromptsRequestSchema, async () => ({
  prompts: [...prompts].map(([name, description]) => ({ name, description })),
}));

server.setRequestHandler(GetPromptRequestSchema, async (request) => {
  const name = request.params.name;
  if (!prompts.has(name)) throw new Error(`no prompt ${name}`);
  return {
    messages: [{ role: "user", content: { type: "text", text: `prompt ${name}` } }],
  };
});

const nameSchema = {
  type: "object",
  properties: { name: { type: "string" }, description: { type: "string" } },
  required: ["name"],
};

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    { name: "add-prompt", description: "Adds a prompt", inputSchema: nameSchema },
    { name: "remove-prompt", description: "Removes a prompt", inputSchema: nameSchema },
  ],
}));

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const { name, description } = request.params.arguments ?? {};
  if (request.params.name === "add-prompt") {
    prompts.set(name, description ?? `Prompt ${name}`);
  } else if (request.params.name === "remove-prompt") {
    prompts.delete(name);
  } else {
    throw new Error(`no tool ${request.params.name}`);
  }
  await server.sendPromptListChanged();
  return { content: [{ type: "text", text: [...prompts.keys()].join(",") }] };
});

await server.connect(new StdioServerTransport());
