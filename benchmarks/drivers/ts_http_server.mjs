// The TypeScript SDK's Streamable HTTP echo server, for bench_http_neutral.py.
//
//   node benchmarks/drivers/ts_http_server.mjs [--port N] [--sse]
//
// @modelcontextprotocol/sdk (pinned in tests/interop/package.json): one
// McpServer per session with the tool `echo(text)` answering one text block,
// each session on its own StreamableHTTPServerTransport (stateful: a session
// id per initialize) with enableJsonResponse: true (--sse: false), behind a
// plain node:http server on 127.0.0.1 (a free port unless --port), path /mcp.
// Prints `url <url>` once it listens; exits when its stdin closes.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { onStdinEnd, requirePinned } from './_npm.mjs';

const { McpServer } = requirePinned('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = requirePinned('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { z } = requirePinned('zod');

const args = process.argv.slice(2);
const portAt = args.indexOf('--port');
const port = portAt >= 0 ? Number(args[portAt + 1]) : 0;
const enableJsonResponse = !args.includes('--sse');
const PATH = '/mcp';

function echoServer() {
  const server = new McpServer({ name: 'bench-echo', version: '1.0' });
  server.registerTool(
    'echo',
    { description: 'Echo the text back.', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  return server;
}

/** Live sessions: session id -> transport. */
const sessions = new Map();

function refuse(res, status, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message } }));
}

async function handle(req, res) {
  if (req.url !== PATH) return refuse(res, 404, 'Not Found');
  const sessionId = req.headers['mcp-session-id'];
  let transport = sessionId === undefined ? undefined : sessions.get(sessionId);
  if (transport === undefined) {
    if (sessionId !== undefined) return refuse(res, 404, 'Session not found');
    // No session yet: only an initialize may come here; the transport refuses anything else.
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse,
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    await echoServer().connect(transport);
  }
  await transport.handleRequest(req, res);
}

const http = createServer((req, res) => {
  handle(req, res).catch((error) => {
    if (!res.headersSent) refuse(res, 500, String(error));
    else res.end();
  });
});
http.listen(port, '127.0.0.1', () => {
  process.stdout.write(`url http://127.0.0.1:${http.address().port}${PATH}\n`);
});
onStdinEnd(() => process.exit(0));
