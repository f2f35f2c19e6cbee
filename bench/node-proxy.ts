/**
 * A calibration point, not a product: the plainest Node reverse proxy (node:http server, one
 * keep-alive agent, round-robin over the upstreams, `req.pipe(upstream)` / `res.pipe(client)`),
 * run as `node node-proxy.js <port> <upstreamPort>...`. It shows what one Node process can do
 * on this machine before any framework, body buffering or routing logic. `NODE_PROXY_MAX_SOCKETS`
 * sets the agent's cap per upstream (default 256; scenario (w) lifts it, as the router has none).
 */
import http from 'node:http';

function main(): void {
  const [portArg, ...upstreamArgs] = process.argv.slice(2);
  const port = Number(portArg);
  const upstreams = upstreamArgs.map(Number);
  if (!Number.isInteger(port) || upstreams.length === 0 || upstreams.some((p) => !Number.isInteger(p) || p < 1)) {
    throw new Error(`usage: node-proxy.js <port> <upstreamPort>..., got ${process.argv.slice(2).join(' ')}`);
  }
  const maxSockets = Number(process.env['NODE_PROXY_MAX_SOCKETS'] ?? 256);
  const agent = new http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: 256 });
  let next = 0;
  const server = http.createServer((req, res) => {
    const upstreamPort = upstreams[next++ % upstreams.length];
    const headers = { ...req.headers };
    delete headers['connection'];
    const up = http.request({ host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers, agent }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });
  server.keepAliveTimeout = 65_000;
  server.listen(port, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ event: 'listening', port })}\n`));
  process.on('SIGTERM', () => process.exit(0));
}

main();
