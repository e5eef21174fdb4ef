// The driver's ceiling in bench_stdio_neutral.py: a trivial stdio JSON-RPC
// server in Node that does no MCP work beyond the shape of its answers.
//
//   node benchmarks/drivers/echo_stdio_server.mjs
//
// Reads JSON lines; answers `initialize` with a fixed result, every other
// request with the echo tool's result for its `arguments.text`, and ignores
// notifications. Answers gathered from one read go out in one write. Serves
// until its stdin closes.
const INIT = {
  protocolVersion: '2025-11-25',
  capabilities: { tools: {} },
  serverInfo: { name: 'bench-echo-floor', version: '1.0' },
};

let carry = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  const lines = (carry + chunk).split('\n');
  carry = lines.pop();
  let out = '';
  for (const line of lines) {
    if (!line.trim()) continue;
    const message = JSON.parse(line);
    if (message.id === undefined) continue;
    const result =
      message.method === 'initialize'
        ? INIT
        : { content: [{ type: 'text', text: message.params?.arguments?.text ?? '' }] };
    out += `${JSON.stringify({ jsonrpc: '2.0', id: message.id, result })}\n`;
  }
  if (out) process.stdout.write(out);
});
process.stdin.on('end', () => process.exit(0));
