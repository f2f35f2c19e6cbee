/**
 * Argv templates of launched replicas: placeholder checking and expansion, the launch/stop argv
 * and environment of a slot. Pure functions, no I/O.
 *
 * Template syntax (a subset of Python's `str.format`, which pypto-serving-router used):
 * `{name}` is replaced by the slot's value; `{{` and `}}` are literal braces. Templated are every
 * element of `command`, `launch_wrapper` and `stop_command`, and every value of `env`. `serve_args`
 * are passed literally, as pypto-serving-router did, so an argument holding JSON (`{"a": 1}`)
 * works unchanged. Plain values (`model`, `served_model_name`, `python`) are never templated. Nothing here is ever parsed by a shell, except the one `launch_wrapper` argument,
 * which is quoted with `shellJoin` (shell-quote.ts).
 */
import { shellJoin } from './shell-quote.js';
import { childPath, type ConfigProblem } from './config-error.js';
import type { HostSpec, SlotSpec } from './router-config.js';

/** Every placeholder a template may use. */
export const TEMPLATE_PLACEHOLDERS = ['model', 'served_model_name', 'port', 'device', 'devices', 'host', 'slot'] as const;

export type TemplatePlaceholder = (typeof TEMPLATE_PLACEHOLDERS)[number];

/** Values of the placeholders for one slot, already as strings. */
export type TemplateVars = Readonly<Record<TemplatePlaceholder, string>>;

type Piece = { readonly text: string } | { readonly name: string };

const KNOWN: ReadonlySet<string> = new Set(TEMPLATE_PLACEHOLDERS);
const KNOWN_LIST = TEMPLATE_PLACEHOLDERS.map((p) => `{${p}}`).join(', ');

/** Splits a template into literal text and placeholder names; problems for malformed braces. */
function scan(template: string): { pieces: Piece[]; problems: string[] } {
  const pieces: Piece[] = [];
  const problems: string[] = [];
  let text = '';
  let i = 0;
  while (i < template.length) {
    const c = template[i];
    if ((c === '{' || c === '}') && template[i + 1] === c) {
      text += c;
      i += 2;
    } else if (c === '}') {
      problems.push(`unbalanced "}" at offset ${i} (write "}}" for a literal brace)`);
      i += 1;
    } else if (c === '{') {
      const close = template.indexOf('}', i + 1);
      const open = template.indexOf('{', i + 1);
      if (close < 0 || (open >= 0 && open < close)) {
        problems.push(`unbalanced "{" at offset ${i} (write "{{" for a literal brace)`);
        i += 1;
        continue;
      }
      const name = template.slice(i + 1, close);
      if (!KNOWN.has(name)) problems.push(`unknown placeholder {${name}} (known: ${KNOWN_LIST}; write {{ and }} for literal braces)`);
      if (text !== '') pieces.push({ text });
      text = '';
      pieces.push({ name });
      i = close + 1;
    } else {
      text += c;
      i += 1;
    }
  }
  if (text !== '') pieces.push({ text });
  return { pieces, problems };
}

/** Problems of one template string: unknown placeholders and unbalanced braces. Empty when valid. */
export function findTemplateProblems(template: string): string[] {
  return scan(template).problems;
}

/** Placeholder names a template uses (valid ones only). */
export function templatePlaceholders(template: string): TemplatePlaceholder[] {
  const used: TemplatePlaceholder[] = [];
  for (const piece of scan(template).pieces) {
    if ('name' in piece && KNOWN.has(piece.name)) used.push(piece.name as TemplatePlaceholder);
  }
  return used;
}

/** The templated fields of a host, by their config-file names. */
const TEMPLATED_LISTS = [
  ['command', 'command'],
  ['launch_wrapper', 'launchWrapper'],
  ['stop_command', 'stopCommand'],
] as const;

/**
 * Template problems of one host, each at its element's JSON path (`hosts[0].command[3]`,
 * `hosts[0].env.CUDA_VISIBLE_DEVICES`): malformed templates, `{model}` / `{served_model_name}`
 * used by a host that declares no model, and a NUL byte in any word of the launch argv or env
 * (no argv can carry one, and shellQuote refuses it).
 */
export function findHostTemplateProblems(host: HostSpec, path: string): ConfigProblem[] {
  const templates: [string, string][] = [];
  for (const [field, key] of TEMPLATED_LISTS) {
    (host[key] ?? []).forEach((t, i) => templates.push([childPath(childPath(path, field), i), t]));
  }
  for (const [name, value] of Object.entries(host.env)) templates.push([childPath(childPath(path, 'env'), name), value]);
  const words: [string, string | undefined][] = [
    ...templates,
    [childPath(path, 'model'), host.model],
    [childPath(path, 'served_model_name'), host.servedModelName],
    [childPath(path, 'python'), host.python],
    ...host.serveArgs.map((a, i): [string, string] => [childPath(childPath(path, 'serve_args'), i), a]),
  ];
  const problems: ConfigProblem[] = [];
  for (const [where, word] of words) {
    if (word?.includes('\0')) problems.push({ path: where, message: 'contains a NUL byte, which no argv or environment can carry' });
  }
  for (const [where, template] of templates) {
    for (const message of findTemplateProblems(template)) problems.push({ path: where, message });
    const used = templatePlaceholders(template);
    const unset = used.find(
      (p) => (p === 'model' && host.model === undefined) || (p === 'served_model_name' && host.model === undefined && host.servedModelName === undefined),
    );
    if (unset !== undefined)
      problems.push({ path: where, message: `uses {${unset}} but the host declares no "${unset === 'model' ? 'model' : 'served_model_name" or "model'}"` });
  }
  return problems;
}

/**
 * Expands `{placeholder}`s and `{{`/`}}` in one template. Throws when the template is malformed;
 * the loader rejects such templates, so this only happens for templates built outside config.
 */
export function expandTemplate(template: string, vars: TemplateVars): string {
  const { pieces, problems } = scan(template);
  if (problems.length > 0) throw new Error(`invalid template ${JSON.stringify(template)}: ${problems.join('; ')}`);
  return pieces.map((p) => ('text' in p ? p.text : vars[p.name as TemplatePlaceholder])).join('');
}

/**
 * Placeholder values for a slot of a host. `{served_model_name}` falls back to the model (what
 * vLLM and pypto-serving report when no served name is set); `{host}` is the host's name.
 */
export function templateVars(host: HostSpec, slot: SlotSpec): TemplateVars {
  return {
    model: host.model ?? '',
    served_model_name: host.servedModelName ?? host.model ?? '',
    port: String(slot.port),
    device: String(slot.devices[0]),
    devices: slot.devices.join(','),
    host: host.name,
    slot: slot.name,
  };
}

/**
 * The argv that starts the replica of `slot`:
 * - `command` given: the expanded `command` — the whole argv (`serve_args` and `python` unused);
 * - else pypto-serving-router's serve argv: `[python, -m, pypto_serving.cli, --model, M, --devices,
 *   {devices}, --host, 0.0.0.0, --port, {port}, --show-startup-logs]`, then
 *   `[--served-model-name, X]` when set, then `serve_args` as written;
 * - a non-empty `launch_wrapper` turns argv A into `[...wrapper (expanded), shellJoin(A)]`, for a
 *   `command` as well as for the default argv.
 */
export function buildLaunchArgv(host: HostSpec, slot: SlotSpec): string[] {
  const vars = templateVars(host, slot);
  const expand = (t: string): string => expandTemplate(t, vars);
  let argv: string[];
  if (host.command !== undefined) {
    argv = host.command.map(expand);
  } else {
    argv = [host.python, '-m', 'pypto_serving.cli', '--model', host.model ?? '', '--devices', vars.devices];
    argv.push('--host', '0.0.0.0', '--port', vars.port, '--show-startup-logs');
    if (host.servedModelName !== undefined) argv.push('--served-model-name', host.servedModelName);
    argv.push(...host.serveArgs);
  }
  if (host.launchWrapper !== undefined && host.launchWrapper.length > 0) {
    return [...host.launchWrapper.map(expand), shellJoin(argv)];
  }
  return argv;
}

/** The expanded `stop_command`, or undefined (the launcher then signals the recorded process group). */
export function buildStopArgv(host: HostSpec, slot: SlotSpec): string[] | undefined {
  if (host.stopCommand === undefined) return undefined;
  const vars = templateVars(host, slot);
  return host.stopCommand.map((t) => expandTemplate(t, vars));
}

/**
 * Environment of a launched replica: the router's environment minus every `ROUTER_*` variable (so
 * the admin token never reaches a replica), plus the host's `env` with its values expanded.
 */
export function buildLaunchEnv(host: HostSpec, slot: SlotSpec, routerEnv: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(routerEnv)) {
    if (value !== undefined && !key.startsWith('ROUTER_')) env[key] = value;
  }
  const vars = templateVars(host, slot);
  for (const [key, value] of Object.entries(host.env)) env[key] = expandTemplate(value, vars);
  return env;
}
