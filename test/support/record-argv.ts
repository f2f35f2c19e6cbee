/**
 * Stands in for a launch wrapper (task-submit and the like) in tests: records the argv it was
 * given into `$RECORD_FILE`, then runs the replica simulator on the port given as its first
 * argument, named by its second.
 *   record-argv.js <port> <name> <the wrapped serve command as one argument>
 */
import { writeFileSync } from 'node:fs';
import { SIM_ENTRY } from './sim-process.js';

const [port, name] = process.argv.slice(2);
writeFileSync(process.env['RECORD_FILE'] ?? '/dev/null', JSON.stringify({ argv: process.argv.slice(2), env: { DEVICE: process.env['DEVICE'] } }));
process.argv = [process.argv[0], SIM_ENTRY, '--port', port, '--name', name];
await import(SIM_ENTRY);
