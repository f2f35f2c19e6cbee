/**
 * Schema of the config file (SPEC §2) as class-validator + class-transformer DTOs, with the
 * file's snake_case field names. `validateConfigFile` turns parsed JSON/YAML into a `ConfigFileDto`
 * and one problem per wrong field, each naming its JSON path (`hosts[1].devices_per_replica`).
 * Unknown fields anywhere are errors (`whitelist` + `forbidNonWhitelisted`). Types are checked
 * strictly: nothing is converted (a port `"8000"` or `true` is an error).
 *
 * `null` counts as absent for optional fields (pypto-serving-router files often write
 * `"ssh": null`); required fields must hold a value. Rules that span several fields (slot ports,
 * `devices_per_replica` dividing `devices`, unique names, templates) are checked by the loader.
 */
import 'reflect-metadata';
import { isIPv4, isIPv6 } from 'node:net';
import { plainToInstance, Type } from 'class-transformer';
import { getMetadataStorage, ValidateBy, ValidateIf, ValidateNested, validateSync, type ValidationError } from 'class-validator';
import { childPath, showValue, type ConfigProblem } from './config-error.js';
import type { HostSpec, StaticReplicaSpec } from './router-config.js';

/** Names of replicas and hosts. */
export const NAME_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;
/** Longest duration a setting may have (ms): Node's timer limit; a longer timer would fire at once. */
export const MAX_DURATION_MS = 2 ** 31 - 1;

type Rule = (value: unknown) => string | undefined;

const got = (value: unknown): string => `got ${showValue(value)}`;
const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

// ---- value rules, shared with the flag table ---------------------------------------------------

const LABEL = '[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?';
const HOSTNAME = new RegExp(`^(?=.{1,253}\\.?$)${LABEL}(\\.${LABEL})*\\.?$`);

/** A hostname, IPv4 or IPv6 address (brackets allowed around IPv6). Returns a problem or undefined. */
export function checkHostAddress(value: string): string | undefined {
  const bare = value.startsWith('[') && value.endsWith(']') ? value.slice(1, -1) : value;
  if (isIPv6(bare) || (bare === value && isIPv4(value))) return undefined;
  if (bare === value && HOSTNAME.test(value) && !/^[\d.]+$/.test(value)) return undefined;
  return `must be a hostname, IPv4 or IPv6 address, ${got(value)}`;
}

/** An ssh destination `user@host`, `host`, `user@[v6]` or a bare IPv6 address. */
export function checkSshDestination(value: string): string | undefined {
  const at = value.lastIndexOf('@');
  const user = at >= 0 ? value.slice(0, at) : undefined;
  const host = value.slice(at + 1);
  const hostOk = checkHostAddress(host) === undefined;
  if (user !== undefined && (user === '' || /[\s\0]/.test(user) || user.startsWith('-'))) {
    return `must be user@host, host or null (local), and the user part is not valid: ${got(value)}`;
  }
  if (!hostOk) return `must be user@host, host or null (local), with host a hostname or IP address (set the port with ssh_port), ${got(value)}`;
  return undefined;
}

/** A header name as Node reports it: a lower-cased RFC 9110 token. */
export function checkSessionHeader(value: string): string | undefined {
  return /^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(value.toLowerCase()) ? undefined : `must be an HTTP header name, ${got(value)}`;
}

/** An absolute request path. */
export function checkHealthPath(value: string): string | undefined {
  return /^\/[\x21-\x7e]*$/.test(value) ? undefined : `must be a path starting with "/" (no spaces), ${got(value)}`;
}

// ---- field rules -------------------------------------------------------------------------------

const integer = (min: number, max = Number.MAX_SAFE_INTEGER): Rule => (v) =>
  typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max
    ? undefined
    : `must be an integer ${max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in ${min}..${max}`}, ${got(v)}`;
const port = integer(1, 65535);
const seconds: Rule = (v) =>
  typeof v !== 'number' || !(v > 0) || !Number.isFinite(v)
    ? `must be a number of seconds > 0, ${got(v)}`
    : v * 1000 > MAX_DURATION_MS
      ? `must be at most ${Math.floor(MAX_DURATION_MS / 1000)} seconds, ${got(v)}`
      : undefined;
const boolean: Rule = (v) => (typeof v === 'boolean' ? undefined : `must be true or false, ${got(v)}`);
const text: Rule = (v) => (typeof v === 'string' && v !== '' ? undefined : `must be a non-empty string, ${got(v)}`);
const checked = (check: (s: string) => string | undefined): Rule => (v) => text(v) ?? check(v as string);
const oneOf = (choices: readonly string[]): Rule => (v) =>
  typeof v === 'string' && choices.includes(v) ? undefined : `must be one of ${choices.map((c) => `"${c}"`).join(', ')}, ${got(v)}`;
/** Replica/host names; absent or null means "use the default name", but a present name is never empty (SPEC §2). */
const optionalName: Rule = (v) =>
  v === undefined || v === null || (typeof v === 'string' && NAME_PATTERN.test(v))
    ? undefined
    : v === ''
      ? 'must not be empty (leave the name out, or set it to null, for the default name)'
      : `must be 1-64 characters of A-Z a-z 0-9 . _ : -, ${got(v)}`;
const stringList = (nonEmpty: boolean): Rule => (v) => {
  if (!Array.isArray(v)) return `must be an array of strings, ${got(v)}`;
  if (nonEmpty && v.length === 0) return 'must not be empty';
  const bad = v.findIndex((s) => typeof s !== 'string');
  if (bad >= 0) return `must hold only strings; element [${bad}] is ${showValue(v[bad])}`;
  if (nonEmpty && v[0] === '') return 'element [0] (the program) must not be empty';
  return undefined;
};
const devices: Rule = (v) => {
  if (!Array.isArray(v) || v.length === 0) return `must be a non-empty array of device ids, ${got(v)}`;
  const bad = v.findIndex((d) => typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0);
  if (bad >= 0) return `device ids must be integers >= 0; element [${bad}] is ${showValue(v[bad])}`;
  const dup = v.find((d, i) => v.indexOf(d) !== i);
  return dup === undefined ? undefined : `device id ${showValue(dup)} is declared more than once`;
};
const envMap: Rule = (v) => {
  if (!isPlainObject(v)) return `must be an object of NAME: "value" strings, ${got(v)}`;
  for (const [key, value] of Object.entries(v)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) return `variable name ${showValue(key)} is not valid (use [A-Za-z_][A-Za-z0-9_]*)`;
    if (typeof value !== 'string') return `value of ${key} must be a string, ${got(value)}`;
  }
  return undefined;
};
/** Arrays of objects; non-object elements other than arrays are reported per element by the nested validation. */
const objectList: Rule = (v) => {
  if (!Array.isArray(v)) return `must be an array of objects, ${got(v)}`;
  const nested = v.findIndex((e) => Array.isArray(e));
  return nested < 0 ? undefined : `element [${nested}] must be an object, ${got(v[nested])}`;
};
const section: Rule = (v) => (isPlainObject(v) ? undefined : `must be an object, ${got(v)}`);

/** A class-validator decorator from a rule: one message per field, naming the offending value. */
function Check(rule: Rule): PropertyDecorator {
  return ValidateBy({
    name: 'configRule',
    validator: { validate: (value: unknown) => rule(value) === undefined, defaultMessage: (args) => rule(args?.value) ?? '' },
  });
}

/** Message for a list element or section that is not an object. */
const mustBeObject = (args: { value: unknown }): string => `must be an object, ${got(args.value)}`;

/** Skip the field's other rules when it is absent or null. */
const Optional = (): PropertyDecorator => ValidateIf((_object: object, value: unknown) => value !== undefined && value !== null);

// ---- DTOs --------------------------------------------------------------------------------------

/** `replicas[i]`: an already running replica. */
export class StaticReplicaDto {
  @Check(optionalName) readonly name?: string | null;
  @Check(checked(checkHostAddress)) readonly host!: string;
  @Check(port) readonly port!: number;
  @Optional() @Check(oneOf(['http', 'https'])) readonly scheme?: 'http' | 'https';
  @Optional() @Check(text) readonly ca_file?: string;
  @Optional() @Check(boolean) readonly tls_verify?: boolean;
  @Optional() @Check(integer(1)) readonly max_inflight?: number;
}

/** `hosts[i]`: a machine the router may launch replicas on. */
export class HostDto {
  @Check(optionalName) readonly name?: string | null;
  @Optional() @Check(checked(checkSshDestination)) readonly ssh?: string | null;
  @Optional() @Check(port) readonly ssh_port?: number;
  @Optional() @Check(text) readonly identity_file?: string;
  @Optional() @Check(text) readonly known_hosts?: string;
  @Optional() @Check(boolean) readonly insecure_accept_host_key?: boolean;
  @Check(devices) readonly devices!: number[];
  @Optional() @Check(integer(1)) readonly devices_per_replica?: number;
  @Optional() @Check(integer(Number.MIN_SAFE_INTEGER)) readonly port_base?: number;
  @Optional() @Check(text) readonly model?: string;
  @Optional() @Check(text) readonly served_model_name?: string;
  @Optional() @Check(stringList(false)) readonly serve_args?: string[];
  @Optional() @Check(envMap) readonly env?: Record<string, string>;
  @Optional() @Check(stringList(true)) readonly command?: string[];
  @Optional() @Check(stringList(false)) readonly launch_wrapper?: string[];
  @Optional() @Check(stringList(true)) readonly stop_command?: string[];
  @Optional() @Check(text) readonly python?: string;
  @Optional() @Check(text) readonly workdir?: string;
  @Optional() @Check(text) readonly log_dir?: string;
  @Optional() @Check(integer(1)) readonly max_inflight?: number;
}

/** `routing`: session affinity settings (seconds in the file). */
export class RoutingDto {
  @Optional() @Check(checked(checkSessionHeader)) readonly session_header?: string;
  @Optional() @Check(text) readonly body_field?: string;
  @Optional() @Check(integer(0)) readonly affinity_slack?: number;
  @Optional() @Check(seconds) readonly session_ttl?: number;
  @Optional() @Check(integer(1)) readonly max_sessions?: number;
}

/** `health`: active health checking (seconds in the file). */
export class HealthDto {
  @Optional() @Check(checked(checkHealthPath)) readonly path?: string;
  @Optional() @Check(seconds) readonly interval?: number;
  @Optional() @Check(seconds) readonly timeout?: number;
  @Optional() @Check(integer(1)) readonly fall?: number;
  @Optional() @Check(integer(1)) readonly rise?: number;
}

/** The whole file. */
export class ConfigFileDto {
  @Optional() @Check(objectList) @ValidateNested({ each: true, message: mustBeObject }) @Type(() => StaticReplicaDto)
  readonly replicas?: StaticReplicaDto[];

  @Optional() @Check(objectList) @ValidateNested({ each: true, message: mustBeObject }) @Type(() => HostDto)
  readonly hosts?: HostDto[];

  @Optional() @Check(section) @ValidateNested({ message: mustBeObject }) @Type(() => RoutingDto)
  readonly routing?: RoutingDto;

  @Optional() @Check(section) @ValidateNested({ message: mustBeObject }) @Type(() => HealthDto)
  readonly health?: HealthDto;
}

// ---- validation --------------------------------------------------------------------------------

/** Result of `validateConfigFile`: the DTO (also when problems were found) and every problem. */
export interface ConfigFileCheck {
  readonly dto: ConfigFileDto | undefined;
  readonly problems: ConfigProblem[];
}

/** Validates a parsed config file; `root` prefixes paths of whole-file problems (`config`). */
export function validateConfigFile(plain: unknown, root = 'config'): ConfigFileCheck {
  if (!isPlainObject(plain)) {
    return { dto: undefined, problems: [{ path: root, message: `must be a JSON/YAML object, ${got(plain)}` }] };
  }
  const problems: ConfigProblem[] = [];
  stripReservedKeys(plain, '', problems);
  const dto = plainToInstance(ConfigFileDto, plain);
  const errors = validateSync(dto, { whitelist: true, forbidNonWhitelisted: true, stopAtFirstError: true, forbidUnknownValues: true });
  flatten(errors, '', false, problems);
  return { dto, problems };
}

/** Keys that no DTO has and that class-transformer would drop or turn into prototype changes. */
const RESERVED_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** Refuses (and removes) reserved keys anywhere, as unknown fields, before the transformation. */
function stripReservedKeys(value: unknown, path: string, problems: ConfigProblem[]): void {
  if (Array.isArray(value)) value.forEach((v, i) => stripReservedKeys(v, childPath(path, i), problems));
  if (!isPlainObject(value)) return;
  for (const key of Object.keys(value)) {
    if (RESERVED_KEYS.has(key)) {
      problems.push({ path: childPath(path, key), message: 'unknown field' });
      delete value[key];
    } else {
      stripReservedKeys(value[key], childPath(path, key), problems);
    }
  }
}

function flatten(errors: readonly ValidationError[], parent: string, parentIsArray: boolean, out: ConfigProblem[]): void {
  for (const error of errors) {
    const path = parentIsArray && /^\d+$/.test(error.property) ? childPath(parent, Number(error.property)) : childPath(parent, error.property);
    for (const [kind, message] of Object.entries(error.constraints ?? {})) {
      out.push({ path, message: kind === 'whitelistValidation' ? unknownField(error) : message });
    }
    flatten(error.children ?? [], path, Array.isArray(error.value), out);
  }
}

function unknownField(error: ValidationError): string {
  const target = error.target?.constructor;
  if (target === undefined) return 'unknown field';
  const fields = getMetadataStorage()
    .getTargetValidationMetadatas(target, '', true, false)
    .map((m) => m.propertyName);
  return `unknown field (allowed here: ${[...new Set(fields)].join(', ')})`;
}

// ---- DTO → spec --------------------------------------------------------------------------------

type PathMapper = (path: string | undefined) => string | undefined;
const isUnset = (v: unknown): v is undefined | null => v === undefined || v === null;
/** Drops undefined values, so optional spec fields are absent rather than undefined. */
const defined = <T extends object>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/** A validated replica entry as a spec: IPv6 brackets dropped, name defaulted to `host:port`. */
export function toStaticReplicaSpec(dto: StaticReplicaDto, mapPath: PathMapper): StaticReplicaSpec {
  const host = dto.host.replace(/^\[(.*)\]$/, '$1');
  return {
    name: isUnset(dto.name) ? `${host}:${dto.port}` : dto.name,
    host,
    port: dto.port,
    scheme: dto.scheme ?? 'http',
    tlsVerify: dto.tls_verify ?? true,
    ...defined({ caFile: mapPath(dto.ca_file ?? undefined), maxInflight: dto.max_inflight ?? undefined }),
  };
}

/** A validated host entry (index `index` in `hosts`) as a spec, with every default filled in. */
export function toHostSpec(dto: HostDto, index: number, mapPath: PathMapper): HostSpec {
  return {
    name: isUnset(dto.name) ? `host${index}` : dto.name,
    ssh: dto.ssh ?? null,
    sshPort: dto.ssh_port ?? 22,
    insecureAcceptHostKey: dto.insecure_accept_host_key ?? false,
    devices: dto.devices,
    devicesPerReplica: dto.devices_per_replica ?? 1,
    portBase: dto.port_base ?? 8001,
    serveArgs: dto.serve_args ?? [],
    env: dto.env ?? {},
    python: dto.python ?? 'python3',
    logDir: dto.log_dir ?? '/tmp/affinity-router',
    ...defined({
      identityFile: mapPath(dto.identity_file ?? undefined),
      knownHosts: mapPath(dto.known_hosts ?? undefined),
      model: dto.model ?? undefined,
      servedModelName: dto.served_model_name ?? undefined,
      command: dto.command ?? undefined,
      launchWrapper: dto.launch_wrapper ?? undefined,
      stopCommand: dto.stop_command ?? undefined,
      workdir: dto.workdir ?? undefined,
      maxInflight: dto.max_inflight ?? undefined,
    }),
  };
}
