// The TypeScript SDK's stdio echo server, for bench_stdio_neutral.py.
//
//   node benchmarks/drivers/ts_stdio_server.mjs
//
// @modelcontextprotocol/sdk (pinned in tests/interop/package.json): an McpServer
// with the tool `echo(text)` answering one text block, on StdioServerTransport.
// Serves until its stdin closes.
import { requirePinned } from './_npm.mjs';

const { McpServer } = requirePinned('@modelcontextprotocol/sdk/server/mcp.js');
const { StdioServerTransport } = requirePinned('@modelcontextprotocol/sdk/server/stdio.js');
const { z } = requirePinned('zod');

const server = new McpServer({ name: 'bench-echo', version: '1.0' });
server.registerTool(
  'echo',
  { description: 'Echo the text back.', inputSchema: { text: z.string() } },
  async ({ text }) => ({ content: [{ type: 'text', text }] }),
);
process.stdin.on('end', () => process.exit(0));
await server.connect(new StdioServerTransport());
