import 'reflect-metadata';
import http from 'node:http';
import { ValidationPipe, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import { AppModule, type AppOptions } from './app.module.js';
import type { RouterConfig } from './config/router-config.js';
import { APP_LOGGER } from './common/logging/logging.module.js';
import type { AppLogger } from './common/logging/logger.js';
import { NestLoggerAdapter } from './common/logging/nest-logger.adapter.js';
import { ProblemFilter } from './common/errors/problem.filter.js';
import { LifecycleService } from './modules/lifecycle/lifecycle.service.js';
import { LeaderService } from './modules/cluster/leader.service.js';
import { WorkerPool } from './modules/workers/worker-pool.service.js';
import type { AddressInfo } from 'node:net';
import { DataPlaneService } from './modules/proxy/data-plane.service.js';
import { admitAdminRequest } from './common/auth/admin-gate.js';
import { AdminTokenCheck } from './common/auth/admin-token.js';
import { adminJsonParser } from './common/errors/admin-json.js';
import { clientServerOptions, LISTEN_BACKLOG } from './common/http/client-server.js';
import { clientErrorHandler, frameworkErrorHandler, refuseConnect, refuseWithoutHost } from './common/errors/edge-errors.js';
import { installTracing, ROUTER_VERSION, startTracing } from './common/tracing/tracing.js';

/** Admin bodies are small DTOs. */
const ADMIN_BODY_LIMIT = 1024 * 1024;
/**
 * Longest route parameter: `/sessions/:id` takes every id the data plane accepts, and an id the
 * data plane would replace by its hash can be managed too (sessions.controller.ts). Node's header
 * limit (16 KiB, the request line included) is the real bound.
 */
const MAX_PARAM_LENGTH = 16 * 1024;

export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const doc = new DocumentBuilder()
    .setTitle('affinity-router admin API')
    .setDescription(
      'Replica fleet and session administration. Every route needs `Authorization: Bearer <ROUTER_ADMIN_TOKEN>`; ' +
        'errors are application/problem+json (RFC 9457) with a pypto-compatible `message` member.',
    )
    .setVersion('1')
    // addSecurity, not addBearerAuth: that one adds `bearerFormat: "JWT"`, and the token is an opaque secret.
    .addSecurity('bearer', { type: 'http', scheme: 'bearer', description: 'ROUTER_ADMIN_TOKEN (an opaque secret, not a JWT)' })
    .build();
  return SwaggerModule.createDocument(app, doc);
}

/** Build the Nest application (not listening). Used by main.ts and by the tests. */
export async function createApp(config: RouterConfig, opts: AppOptions = {}): Promise<NestFastifyApplication> {
  let dataPlane: DataPlaneService | undefined;
  let log: AppLogger | undefined;
  const adminAuth = new AdminTokenCheck(config.adminToken, config.adminOpen);
  const adapter = new FastifyAdapter({
    // The HTTP server is built here rather than by Fastify: `/v1/` goes to the data plane straight
    // from its request listener, everything else to Fastify (docs/design.md §3). With a factory,
    // Fastify applies no server option itself, so every connection limit is set on this server.
    serverFactory: (fastifyHandler: http.RequestListener) =>
      refuseConnect(
        http.createServer(clientServerOptions(config), (req, res) => {
          if (refuseWithoutHost(req, res)) return;
          // serve() never throws or rejects: a failure inside is answered 500 there (internalError).
          if (dataPlane !== undefined && req.url !== undefined && req.url.startsWith('/v1/')) dataPlane.serve(req, res);
          // The admin token is checked before Fastify routes, parses or reads anything (contract §1).
          else if (log === undefined || admitAdminRequest(req, res, adminAuth, log)) fastifyHandler(req, res);
        }),
      ),
    bodyLimit: ADMIN_BODY_LIMIT,
    return503OnClosing: false,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Fastify's and Node's own refusals in the router's error shapes (contract §8).
    frameworkErrors: frameworkErrorHandler(() => log),
    clientErrorHandler: clientErrorHandler(() => log),
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config, opts), adapter, {
    bufferLogs: true,
    abortOnError: false,
  });
  dataPlane = app.get(DataPlaneService);
  log = app.get<AppLogger>(APP_LOGGER);
  app.useLogger(new NestLoggerAdapter(log));
  app.useBodyParser('application/json', { bodyLimit: ADMIN_BODY_LIMIT }, adminJsonParser(app.getHttpAdapter().getInstance()));
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  app.useGlobalFilters(new ProblemFilter(log));
  SwaggerModule.setup('docs', app, () => buildOpenApiDocument(app), { jsonDocumentUrl: 'docs-json' });
  return app;
}

/** Create, initialise (adoption and initial launches run in init hooks) and listen; then ready. */
export async function startRouter(config: RouterConfig, opts: AppOptions = {}): Promise<{ app: NestFastifyApplication; url: string; log: AppLogger }> {
  // Before the app is built: the data plane reads the process's tracing once, as it is constructed.
  const tracing = await startTracing(opts.env ?? {}, 'primary', ROUTER_VERSION);
  installTracing(tracing);
  const app = await createApp(config, opts);
  const log = app.get<AppLogger>(APP_LOGGER);
  for (const w of config.warnings) log.warn(w);
  await app.init();
  const pool = app.get(WorkerPool);
  let url: string;
  if (pool.enabled) {
    // With worker processes the primary's own server takes only the connections the pool keeps
    // (probes, scrapes, the admin API) and what the workers forward; the pool listens on the port.
    await app.listen({ host: '127.0.0.1', port: 0, backlog: LISTEN_BACKLOG });
    const own = app.getHttpServer().address() as AddressInfo;
    url = await pool.start(app.getHttpServer(), own.port);
  } else {
    await app.listen({ host: config.listenHost, port: config.listenPort, backlog: LISTEN_BACKLOG });
    url = await app.getUrl();
  }
  if (/:0$/.test(config.advertiseUrl)) await app.get(LeaderService).setAdvertiseUrl(url);
  app.get(LifecycleService).markRunning();
  log.info(
    { event: 'listening', url, workers: config.workers, replicas: config.replicas.length, hosts: config.hosts.length, tracing: tracing !== undefined },
    'affinity-router listening',
  );
  return { app, url, log };
}
