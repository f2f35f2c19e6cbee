import type { IncomingMessage } from 'node:http';
import type { Exchange } from './exchange.js';

/**
 * Relay a replica's response body to the client as it arrives, never buffered (contract §3), keeping
 * the exchange's byte and timing marks and refreshing a stream's idle timer on every chunk. The
 * caller wrote the headers; this ends the client response when the replica's ends.
 */
export function relayBody(ex: Exchange, proxyRes: IncomingMessage, chunkGap: (seconds: number) => void): void {
  const res = ex.res;
  // Relay by hand rather than pipe(): one listener does the accounting and the write, and the
  // client's back-pressure pauses the replica's socket.
  proxyRes.on('data', (c: Buffer) => {
    if (res.writableEnded || res.destroyed) return;
    if (ex.at.clientFirstByte === 0) ex.at.clientFirstByte = performance.now();
    ex.bytesOut += c.length;
    if (ex.stream) {
      const now = performance.now();
      if (ex.at.lastChunk > 0) chunkGap((now - ex.at.lastChunk) / 1000);
      else ex.at.firstChunk = now;
      ex.at.lastChunk = now;
      ex.timer?.refresh();
      ex.tail = c.length >= 2 ? c.toString('latin1', c.length - 2) : ex.tail.slice(-1) + c.toString('latin1');
    }
    if (!res.write(c)) {
      proxyRes.pause();
      res.once('drain', () => proxyRes.resume());
    }
  });
  proxyRes.once('end', () => {
    if (!res.writableEnded && !res.destroyed) res.end();
  });
}
