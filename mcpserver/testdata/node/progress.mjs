// The official MCP TypeScript SDK's client, for mcpserver's progress test:
// it calls the bash tool with a progress handler and records, per call, the
// output each progress notification carried (_meta "bashvisor/output")
// and the result, in the order the SDK handed them over.
//
// argv: SPEC, a JSON object: {"stdio": [COMMAND, ARGS...]} or
// {"url": URL, "token": TOKEN}, with "calls": [ARGUMENTS...].
// Prints one JSON array, one {"progress": [OUTPUT...], "skipped": N,
// "text": TEXT, "isError": BOOL} per call (or {"error": MESSAGE}).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const spec = JSON.parse(process.argv[2]);
const transport = spec.stdio
  ? new StdioClientTransport({ command: spec.stdio[0], args: spec.stdio.slice(1), stderr: "ignore" })
  : new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers: { Authorization: `Bearer ${spec.token}` } } });
const client = new Client({ name: "bashvisor-ts-progress", version: "0" });
const lost = [];
client.onerror = (e) => lost.push(String(e?.message ?? e));
await client.connect(transport);
const out = [];
for (const args of spec.calls) {
  const rec = { progress: [], skipped: 0 };
  try {
    const r = await client.callTool({ name: "bash", arguments: args }, undefined, {
      onprogress: (p) => {
        const meta = p._meta ?? {};
        if (meta["bashvisor/output"]) rec.progress.push(meta["bashvisor/output"]);
        rec.skipped += meta["bashvisor/skipped"] ?? 0;
      },
    });
    rec.text = r.content?.[0]?.text ?? "";
    rec.isError = !!r.isError;
  } catch (e) {
    rec.error = String(e?.message ?? e);
  }
  out.push(rec);
}
if (spec.url) await transport.terminateSession();
await client.close();
process.stdout.write(JSON.stringify({ calls: out, errors: lost }));
