/**
 * Child process of scenario (x), run as `node --expose-gc prefix-child.js <prefixes> <cap>`:
 * feeds the router's PrefixIndex (capped at `cap` blocks) `prefixes` distinct session-less
 * prompts through the router's own hash chain (a 300-character system prompt shared by 1,000
 * prompts, then a distinct ~300-character user message: 2 new blocks a prompt, so 1M prompts
 * offer 2M blocks to a 1M cap), then reports the
 * index size and the RSS / heap growth after a full GC, at every quarter of the run. Prints one
 * JSON line on stdout.
 */
import { promptChain } from '../src/modules/affinity/prefix-hash.js';
import { PrefixIndex } from '../src/modules/affinity/prefix-index.js';
import { gcNow } from './gc-now.js';

export interface PrefixChildPoint {
  prefixes: number;
  blocks: number;
  rssGrowthMiB: number;
  heapGrowthMiB: number;
}

export interface PrefixChildReport {
  prefixes: number;
  cap: number;
  baseRssMiB: number;
  points: PrefixChildPoint[];
  evicted: number;
  /** RSS growth per entry held at the end. */
  bytesPerBlock: number;
  recordNsPerPrompt: number;
}

const MiB = 1024 * 1024;
const prefixes = Number(process.argv[2] ?? 1_000_000);
const cap = Number(process.argv[3] ?? 1_000_000);
const targets = [{ name: 'r0' }, { name: 'r1' }, { name: 'r2' }];
gcNow();
const base = process.memoryUsage();
const index = new PrefixIndex<{ name: string }>(cap);
const points: PrefixChildPoint[] = [];
const system = 'You are the assistant of app NNNN. '.repeat(9);
// Pushes the user message past one 256-character block: two new blocks a prompt.
const detail = 'I have two bags, a bicycle and a dog, and the ferry leaves at noon; tell me which line to take and where to change. '.repeat(2);
let spent = 0;
for (let i = 0; i < prefixes; i++) {
  const body = {
    model: 'sim-model',
    messages: [
      { role: 'system', content: system.replaceAll('NNNN', String(i % 1000)) },
      { role: 'user', content: `Question ${i}: how do I get from station ${i * 7} to the harbour before ${i % 24} o'clock? ${detail}` },
    ],
  };
  const t = performance.now();
  const chain = promptChain(body);
  index.match(chain.blocks);
  index.record(chain.blocks, targets[i % 3]);
  spent += performance.now() - t;
  if ((i + 1) % Math.ceil(prefixes / 4) === 0 || i + 1 === prefixes) {
    gcNow();
    const m = process.memoryUsage();
    points.push({ prefixes: i + 1, blocks: index.size, rssGrowthMiB: (m.rss - base.rss) / MiB, heapGrowthMiB: (m.heapUsed - base.heapUsed) / MiB });
  }
}
const last = points[points.length - 1];
const report: PrefixChildReport = {
  prefixes,
  cap,
  baseRssMiB: base.rss / MiB,
  points,
  evicted: index.evicted,
  bytesPerBlock: (last.rssGrowthMiB * MiB) / Math.max(1, last.blocks),
  recordNsPerPrompt: (spent * 1e6) / prefixes,
};
process.stdout.write(JSON.stringify(report) + '\n');
