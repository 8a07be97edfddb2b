// The official MCP TypeScript SDK's client, for mcpserver's tests: one
// session over streamable HTTP as the principal of a bearer token, naming a
// conversation when given one.
//
// argv: URL TOKEN CONVERSATION OPS, where OPS is a JSON array of
// {"tools": true} (tools/list), {"tool": NAME, "args": {...}, "meta": {...}}
// (tools/call, with _meta when given), {"read": URI} (resources/read) and
// {"list": true} (resources/list).
// Prints one JSON object: {"protocolVersion", "sessionId", "results": [...]},
// each result the SDK's, or {"error": MESSAGE}. A tool result also has
// "handed": what Claude Code and Codex hand the model of it,
// JSON.stringify(structuredContent) when it has one, else its text.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, conversation, opsJSON] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
if (conversation) {
  headers["Bashvisor-Conversation"] = conversation;
}
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "bashvisor-ts-test", version: "0" });
await client.connect(transport);
const out = { protocolVersion: transport.protocolVersion, sessionId: transport.sessionId, results: [] };
for (const op of JSON.parse(opsJSON)) {
  try {
    if (op.tools) {
      out.results.push(await client.listTools());
    } else if (op.tool) {
      const params = { name: op.tool, arguments: op.args ?? {} };
      if (op.meta) {
        params._meta = op.meta;
      }
      const r = await client.callTool(params);
      r.handed = r.structuredContent !== undefined
        ? JSON.stringify(r.structuredContent)
        : r.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
      out.results.push(r);
    } else if (op.read) {
      out.results.push(await client.readResource({ uri: op.read }));
    } else if (op.list) {
      out.results.push(await client.listResources());
    }
  } catch (e) {
    out.results.push({ error: String(e?.message ?? e) });
  }
}
await transport.terminateSession();
await client.close();
process.stdout.write(JSON.stringify(out));
