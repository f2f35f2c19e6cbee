/**
 * Validates a parsed config file against the DTOs (config.dto.ts): every wrong field is one
 * problem naming its JSON path (`hosts[1].devices_per_replica`). Unknown fields anywhere are errors
 * (`whitelist` + `forbidNonWhitelisted`, the options the admin API's ValidationPipe uses too);
 * nothing is converted. Rules that span fields and entries are checked afterwards (config.fleet.ts).
 */
import { plainToInstance } from 'class-transformer';
import { getMetadataStorage, validateSync, type ValidationError } from 'class-validator';
import { childPath, type ConfigProblem } from './config-error.js';
import { ConfigFileDto } from './config.dto.js';
import { got, isPlainObject } from './config.rules.js';

/** Result of `validateConfigFile`: the DTO (also when problems were found) and every problem. */
export interface ConfigFileCheck {
  readonly dto: ConfigFileDto | undefined;
  readonly problems: ConfigProblem[];
}

/**
 * Validates the document of the config file `fileName`. Problems with the file as a whole (not an
 * object, neither replicas nor hosts) are at path `config`.
 */
export function validateConfigFile(document: unknown, fileName: string): ConfigFileCheck {
  if (!isPlainObject(document)) {
    return { dto: undefined, problems: [{ path: 'config', message: `must be a JSON/YAML object, ${got(document)}` }] };
  }
  const problems: ConfigProblem[] = [];
  stripReservedKeys(document, '', problems);
  const dto = plainToInstance(ConfigFileDto, document);
  const errors = validateSync(dto, { whitelist: true, forbidNonWhitelisted: true, stopAtFirstError: true, forbidUnknownValues: true });
  flatten(errors, '', false, problems);
  const declared = [dto.replicas, dto.hosts].some((list) => Array.isArray(list) && list.length > 0);
  if (!declared && !problems.some((p) => /^(replicas|hosts)\b/.test(p.path))) {
    problems.push({ path: 'config', message: `${JSON.stringify(fileName)} declares neither a replica nor a host (add "replicas" or "hosts")` });
  }
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

/** class-validator's error tree as one problem per constraint, each at its JSON path. */
function flatten(errors: readonly ValidationError[], parent: string, parentIsArray: boolean, out: ConfigProblem[]): void {
  for (const error of errors) {
    const path = parentIsArray && /^\d+$/.test(error.property) ? childPath(parent, Number(error.property)) : childPath(parent, error.property);
    for (const [kind, message] of Object.entries(error.constraints ?? {})) {
      out.push({ path, message: kind === 'whitelistValidation' ? unknownField(error) : message });
    }
    flatten(error.children ?? [], path, Array.isArray(error.value), out);
  }
}

/** `unknown field (allowed here: ...)`, listing the fields of the DTO the field was found in. */
function unknownField(error: ValidationError): string {
  const target = error.target?.constructor;
  if (target === undefined) return 'unknown field';
  const fields = getMetadataStorage()
    .getTargetValidationMetadatas(target, '', true, false)
    .map((m) => m.propertyName);
  return `unknown field (allowed here: ${[...new Set(fields)].join(', ')})`;
}
