import { Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';

import type { HostSpec } from '../../config/router-config.js';
import type { LauncherTransport } from './launcher.transport.js';
import { LocalTransport } from './transports/local.transport.js';
import { SshTransport } from './transports/ssh.transport.js';

/**
 * Hands out the transport of a host: `local` when `host.ssh` is null, else `ssh`. One instance
 * per host name, created on first use and cached (so an ssh host keeps one connection).
 * A Nest test module can swap it with `overrideProvider(LauncherFactory)`.
 */
@Injectable()
export class LauncherFactory implements OnModuleDestroy {
  private readonly logger = new Logger('Launcher');
  private readonly transports = new Map<string, LauncherTransport>();

  /** The (cached) transport for `host`. */
  forHost(host: HostSpec): LauncherTransport {
    const cached = this.transports.get(host.name);
    if (cached !== undefined) return cached;
    const transport: LauncherTransport =
      host.ssh === null
        ? new LocalTransport()
        : new SshTransport(host, {
            logger: (msg) => (msg.startsWith('WARNING') ? this.logger.warn(`${host.name}: ${msg}`) : this.logger.log(`${host.name}: ${msg}`)),
          });
    this.transports.set(host.name, transport);
    return transport;
  }

  /** Close every transport (ends ssh connections). */
  async onModuleDestroy(): Promise<void> {
    const all = [...this.transports.values()];
    this.transports.clear();
    const results = await Promise.allSettled(all.map((t) => t.close()));
    for (const r of results) {
      if (r.status === 'rejected') this.logger.warn(`closing a launcher transport failed: ${String(r.reason)}`);
    }
  }
}
