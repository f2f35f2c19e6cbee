/**
 * OpenTelemetry traces (docs/tracing.md): off unless the standard `OTEL_*` environment names an
 * OTLP endpoint. Then this process, the primary or a worker, gets its own tracer provider with an
 * OTLP/HTTP exporter behind a batch processor. Endpoint, headers, sampler, batch delays and
 * resource attributes are all read from the same `OTEL_*` variables the official SDK documents.
 * When tracing is off, nothing of the SDK is loaded and every hook in the data path is one
 * `undefined` check.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type TextMapPropagator, type Tracer } from '@opentelemetry/api';
import type { ProcessEnv } from '../../config/process-env.js';

/** The router's version, as `service.version` of its spans (package.json). */
export const ROUTER_VERSION = '0.1.0';

/** Which process of the router a span comes from (resource attribute `affinity_router.process`). */
export type ProcessRole = 'primary' | 'worker';

/** Whether the environment asks for traces: an OTLP endpoint, and neither the SDK nor the traces exporter turned off. */
export function tracingRequested(env: ProcessEnv): boolean {
  if ((env['OTEL_SDK_DISABLED'] ?? '').trim().toLowerCase() === 'true') return false;
  if ((env['OTEL_TRACES_EXPORTER'] ?? '').trim().toLowerCase() === 'none') return false;
  return (env['OTEL_EXPORTER_OTLP_ENDPOINT'] ?? '').trim() !== '' || (env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] ?? '').trim() !== '';
}

/** The short hash a span carries instead of a session id (never the id itself). */
export function sessionHash(id: string): string {
  return createHash('sha256').update(id).digest('hex').slice(0, 16);
}

const headerGetter = {
  keys: (h: IncomingHttpHeaders): string[] => Object.keys(h),
  get: (h: IncomingHttpHeaders, key: string): string | string[] | undefined => h[key],
};

const headerSetter = {
  set: (h: OutgoingHttpHeaders, key: string, value: string): void => {
    h[key] = value;
  },
};

/**
 * A process's tracing: the tracer, W3C trace-context propagation, and shutdown (the batch is
 * flushed). Spans are plain OpenTelemetry spans; this class only names the three kinds the
 * router makes.
 */
export class RouterTracing {
  constructor(
    readonly tracer: Tracer,
    private readonly propagator: TextMapPropagator,
    private readonly flush: () => Promise<void>,
  ) {}

  /** The server span of a `/v1/` request, in the client's trace when it sent a `traceparent`. */
  serverSpan(method: string, path: string, headers: IncomingHttpHeaders): Span {
    const parent = this.propagator.extract(context.active(), headers, headerGetter);
    return this.tracer.startSpan(`${method} ${path}`, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method, 'url.path': path } }, parent);
  }

  /**
   * A client span for one attempt at a replica, child of `server`; its context goes into the
   * upstream headers (`traceparent`, and the client's `tracestate`), replacing the client's own.
   */
  attemptSpan(server: Span, name: string, attributes: Attributes, upstream: OutgoingHttpHeaders): Span {
    const parent: Context = trace.setSpan(context.active(), server);
    const span = this.tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent);
    delete upstream['traceparent'];
    delete upstream['tracestate'];
    this.propagator.inject(trace.setSpan(parent, span), upstream, headerSetter);
    return span;
  }

  /** A span around a fleet action (launch, drain, stop, adoption, an autoscale decision), ended with its outcome. */
  async action<T>(name: string, attributes: Attributes, run: () => Promise<T>): Promise<T> {
    const span = this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes });
    try {
      const out = await run();
      span.end();
      return out;
    } catch (e: unknown) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) });
      span.end();
      throw e;
    }
  }

  /** Flushes the spans still batched and stops the exporter. */
  shutdown(): Promise<void> {
    return this.flush();
  }
}

/** Ends `span` as failed with `message` (a span status, not an exception event). */
export function endFailed(span: Span, message: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.end();
}

/**
 * Starts tracing for this process when the environment asks for it (tracingRequested), else
 * resolves undefined without loading the SDK. The service name is `OTEL_SERVICE_NAME`, else
 * `affinity-router`.
 */
export async function startTracing(env: ProcessEnv, role: ProcessRole, version: string): Promise<RouterTracing | undefined> {
  if (!tracingRequested(env)) return undefined;
  const [
    { BasicTracerProvider, BatchSpanProcessor },
    { OTLPTraceExporter },
    { defaultResource, detectResources, envDetector, resourceFromAttributes },
    { W3CTraceContextPropagator },
  ] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/core'),
  ]);
  const fromEnv = detectResources({ detectors: [envDetector] });
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'affinity-router', 'service.version': version, 'affinity_router.process': role }))
    .merge(fromEnv);
  const provider = new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] });
  return new RouterTracing(provider.getTracer('affinity-router', version), new W3CTraceContextPropagator(), () => provider.shutdown());
}

/**
 * The process's tracing, like OpenTelemetry's own global provider: installed once at start, before
 * the app is built (app.factory.ts, worker.ts), read by the data path and the fleet.
 */
let installed: RouterTracing | undefined;

export function installTracing(t: RouterTracing | undefined): void {
  installed = t;
}

export function processTracing(): RouterTracing | undefined {
  return installed;
}

/** `run` inside a span named `name` when tracing is on; just `run` when it is off. */
export function traced<T>(name: string, attributes: Attributes, run: () => Promise<T>): Promise<T> {
  return installed === undefined ? run() : installed.action(name, attributes, run);
}
