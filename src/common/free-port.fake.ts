/**
 * Loopback ports for tests that must name a port before something else binds it (a slot's
 * port_base, sshd's config, redis-server's --port).
 *
 * They are drawn below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768–60999
 * by default), never from `listen(0)`: between our check and the child's bind, any outgoing
 * connection on the machine may be given an ephemeral port, and a test that had picked that port
 * then fails with EADDRINUSE. Below the range only another test's explicit choice can collide.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

// Above the fixed ports the shipped configs and the demo use (8000–9004, 18001–18012).
const LOWEST = 20_000;

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > LOWEST + 1_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

const CEILING = ephemeralLow();

function isFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const s = createServer();
    s.once('error', () => done(false));
    s.listen(port, '127.0.0.1', () => s.close(() => done(true)));
  });
}

/** `n` consecutive loopback ports that were free a moment ago (for a host's port_base + device ids). */
export async function freePortRange(n: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = LOWEST + Math.floor(Math.random() * (CEILING - LOWEST - n));
    const ok = await Promise.all(Array.from({ length: n }, (_, i) => isFree(base + i)));
    if (ok.every(Boolean)) return base;
  }
  throw new Error(`no ${n} consecutive free ports found in ${LOWEST}–${CEILING - 1}`);
}

/** One loopback port that was free a moment ago. */
export function freePort(): Promise<number> {
  return freePortRange(1);
}
