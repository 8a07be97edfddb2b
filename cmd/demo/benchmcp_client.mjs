// The TypeScript client of `demo bench -only mcp`: the official MCP
// TypeScript SDK's Client and StdioClientTransport, connected to one
// `demo mcp` server that this script starts (argv: server binary, then its
// arguments). The bench writes it next to a private npm install of the SDK
// and drives it with one JSON request per line on stdin; each answer is one
// JSON line on stdout:
//
//   (on start)                 -> {"pid": SERVER_PID}
//   {"op":"serial","n":N}      -> {"ns": [nanoseconds per call, ...]}
//   {"op":"conc","c":C,"n":N}  -> {"seconds": wall time of N calls, C in flight}
//   {"op":"close"}             -> the client closes the server and exits
//
// Failures answer {"error": "..."}. The server's stderr is passed through.
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "bashvisor-bench", version: "0" });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");

async function call() {
  const r = await client.callTool({ name: "bash", arguments: { command: "true" } });
  if (r.isError) {
    throw new Error("tool error: " + JSON.stringify(r.content));
  }
}

async function main() {
  await client.connect(transport);
  await client.listTools(); // caches the output schema the client validates results against
  send({ pid: transport.pid });
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    const req = JSON.parse(line);
    if (req.op === "close") {
      break;
    }
    try {
      if (req.op === "serial") {
        const ns = [];
        for (let i = 0; i < req.n; i++) {
          const t = process.hrtime.bigint();
          await call();
          ns.push(Number(process.hrtime.bigint() - t));
        }
        send({ ns });
      } else if (req.op === "conc") {
        let next = 0;
        const worker = async () => {
          while (next++ < req.n) {
            await call();
          }
        };
        const t = process.hrtime.bigint();
        await Promise.all(Array.from({ length: req.c }, worker));
        send({ seconds: Number(process.hrtime.bigint() - t) / 1e9 });
      } else {
        send({ error: "unknown op " + JSON.stringify(req.op) });
      }
    } catch (e) {
      send({ error: String((e && e.stack) || e) });
    }
  }
  await client.close();
}

main().catch((e) => {
  send({ error: String((e && e.stack) || e) });
  process.exit(1);
});
