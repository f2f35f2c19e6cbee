import { connect } from 'node:net';

/**
 * Whether something accepts TCP connections on `address:port` within `timeoutMs`: a launch never
 * starts a replica onto a port another process holds (issue 26), and a slot kept for a foreign
 * server is freed once its port is closed. Only an accepted connection counts as taken: a port
 * that refuses, or cannot be reached in time, holds no server the router could route to.
 */
export function portTaken(address: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: address, port });
    const done = (taken: boolean): void => {
      s.destroy();
      resolve(taken);
    };
    s.setTimeout(timeoutMs, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}
