/**
 * The load generator of scenario (w) as its own process (`node production-child.js '<spec JSON>'`),
 * so the orchestrator's samplers (/proc, /metrics, /health) never wait behind 2,000 streams and
 * the generator's CPU is read apart. Writes one JSON line per progress tick (`{"progress": ...}`)
 * and a last line with the result (`{"result": ...}`) on stdout.
 */
import { runProductionLoad, type ProductionLoadSpec } from './production-load.js';

const spec = JSON.parse(process.argv[2] ?? '{}') as ProductionLoadSpec;
const write = (line: unknown): void => {
  process.stdout.write(`${JSON.stringify(line)}\n`);
};
runProductionLoad(spec, (progress) => write({ progress })).then(
  (result) => write({ result }),
  (e: unknown) => {
    process.stderr.write(`production load failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
