// A small MCP server (2025-11-25 streamable HTTP, JSON answers, no session) on Node's own
// http server with a chosen keepAliveTimeout, counting every tool call it runs: the
// keep-alive tests' Node peer (not a test). Node announces its timeout in every answer
// ("Keep-Alive: timeout=N") and closes a connection idle for that long.
//
//   node tests/peers/keepalive_node.cjs PORT KEEP_ALIVE_SECONDS
//
// Tools: hit(key) records key and returns how many hits ran; hits() returns
// {"total": n, "twice": [keys run more than once]}. Binds 127.0.0.1 only.
"use strict";
const http = require("http");

const port = Number(process.argv[2]);
const keepAlive = Number(process.argv[3]);
const hits = new Map();

function total() {
  let n = 0;
  for (const v of hits.values()) n += v;
  return n;
}

function text(value) {
  const s = JSON.stringify(value);
  return { content: [{ type: "text", text: s }], structuredContent: { result: value } };
}

function answer(msg) {
  const p = msg.params || {};
  switch (msg.method) {
    case "initialize":
      return {
        result: {
          protocolVersion: "2025-11-25",
          capabilities: { tools: {} },
          serverInfo: { name: "conduit-keepalive-node", version: "1.0.0" },
        },
      };
    case "ping":
      return { result: {} };
    case "tools/list":
      return {
        result: {
          tools: [
            { name: "hit", inputSchema: { type: "object", properties: { key: { type: "string" } } } },
            { name: "hits", inputSchema: { type: "object" } },
          ],
        },
      };
    case "tools/call": {
      const args = p.arguments || {};
      if (p.name === "hit") {
        const key = String(args.key);
        hits.set(key, (hits.get(key) || 0) + 1);
        return { result: text(total()) };
      }
      if (p.name === "hits") {
        const twice = [...hits.entries()].filter(([, n]) => n > 1).map(([k]) => k).sort();
        return { result: text({ total: total(), twice }) };
      }
      return { error: { code: -32602, message: "unknown tool" } };
    }
    default:
      return { error: { code: -32601, message: "method not found" } };
  }
}

const server = http.createServer((req, res) => {
  if (req.method !== "POST") {
    res.writeHead(405, { Allow: "POST" });
    res.end();
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let msg;
    try {
      msg = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (e) {
      res.writeHead(400, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "parse error" } }));
      return;
    }
    if (msg.id === undefined || msg.method === undefined) {
      res.writeHead(202);
      res.end();
      return;
    }
    const body = JSON.stringify({ jsonrpc: "2.0", id: msg.id, ...answer(msg) });
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(body);
  });
});
server.keepAliveTimeout = keepAlive * 1000;
server.listen(port, "127.0.0.1", () => {
  console.log(`listening on port ${port}`);
});
