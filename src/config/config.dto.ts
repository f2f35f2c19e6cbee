/**
 * Schema of the config file (contract §2) as class-validator + class-transformer DTOs, with the
 * file's snake_case field names. Each field carries one rule (config.rules.ts) whose message names
 * the offending value; config.validate.ts runs them and names each problem by its JSON path.
 *
 * `null` counts as absent for optional fields (pypto-serving-router files often write
 * `"ssh": null`); required fields must hold a value. Rules that span several fields (slot ports,
 * `devices_per_replica` dividing `devices`, unique names, templates) are checked in config.fleet.ts.
 */
import 'reflect-metadata';
import { Type } from 'class-transformer';
import { ValidateNested } from 'class-validator';
import {
  boolean,
  Check,
  checked,
  checkHealthPath,
  checkHostAddress,
  checkSessionHeader,
  checkSshDestination,
  devices,
  envMap,
  integer,
  modelList,
  mustBeObject,
  objectList,
  oneOf,
  Optional,
  optionalName,
  port,
  positive,
  seconds,
  section,
  stringList,
  text,
  workers,
} from './config.rules.js';
import { ENGINES, type EngineKind } from './router-config.js';

/** `replicas[i]`: an already running replica. */
export class StaticReplicaDto {
  @Check(optionalName) readonly name?: string | null;
  @Check(checked(checkHostAddress)) readonly host!: string;
  @Check(port) readonly port!: number;
  @Optional() @Check(oneOf(['http', 'https'])) readonly scheme?: 'http' | 'https';
  @Optional() @Check(text) readonly ca_file?: string;
  @Optional() @Check(boolean) readonly tls_verify?: boolean;
  @Optional() @Check(integer(1)) readonly max_inflight?: number;
  @Optional() @Check(modelList) readonly models?: string[];
  @Optional() @Check(oneOf(ENGINES)) readonly engine?: EngineKind;
  @Optional() @Check(checked(checkHealthPath)) readonly metrics_path?: string;
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
  @Optional() @Check(oneOf(ENGINES)) readonly engine?: EngineKind;
  @Optional() @Check(checked(checkHealthPath)) readonly metrics_path?: string;
}

/** `routing`: session affinity settings (seconds in the file). */
export class RoutingDto {
  @Optional() @Check(checked(checkSessionHeader)) readonly session_header?: string;
  @Optional() @Check(text) readonly body_field?: string;
  @Optional() @Check(integer(0)) readonly affinity_slack?: number;
  @Optional() @Check(seconds) readonly session_ttl?: number;
  @Optional() @Check(integer(1)) readonly max_sessions?: number;
  @Optional() @Check(boolean) readonly prefix_affinity?: boolean;
  @Optional() @Check(integer(1)) readonly prefix_blocks?: number;
  @Optional() @Check(boolean) readonly speed_aware?: boolean;
  @Optional() @Check(boolean) readonly warm_handoff?: boolean;
}

/** `health`: active health checking (seconds in the file). */
export class HealthDto {
  @Optional() @Check(checked(checkHealthPath)) readonly path?: string;
  @Optional() @Check(seconds) readonly interval?: number;
  @Optional() @Check(seconds) readonly timeout?: number;
  @Optional() @Check(integer(1)) readonly fall?: number;
  @Optional() @Check(integer(1)) readonly rise?: number;
  @Optional() @Check(seconds) readonly metrics_interval?: number;
}

/** `autoscale` (contract §6.1): the launched pool's bounds and signal (seconds in the file). */
export class AutoscaleDto {
  @Optional() @Check(integer(1)) readonly min?: number;
  @Optional() @Check(integer(1)) readonly max?: number;
  @Optional() @Check(positive) readonly target_inflight?: number;
  @Optional() @Check(seconds) readonly interval?: number;
  @Optional() @Check(seconds) readonly up_after?: number;
  @Optional() @Check(seconds) readonly down_after?: number;
}

/** The whole file. */
export class ConfigFileDto {
  @Optional()
  @Check(objectList)
  @ValidateNested({ each: true, message: mustBeObject })
  @Type(() => StaticReplicaDto)
  readonly replicas?: StaticReplicaDto[];

  @Optional()
  @Check(objectList)
  @ValidateNested({ each: true, message: mustBeObject })
  @Type(() => HostDto)
  readonly hosts?: HostDto[];

  @Optional()
  @Check(section)
  @ValidateNested({ message: mustBeObject })
  @Type(() => RoutingDto)
  readonly routing?: RoutingDto;

  @Optional()
  @Check(section)
  @ValidateNested({ message: mustBeObject })
  @Type(() => HealthDto)
  readonly health?: HealthDto;

  @Optional()
  @Check(section)
  @ValidateNested({ message: mustBeObject })
  @Type(() => AutoscaleDto)
  readonly autoscale?: AutoscaleDto;

  @Optional() @Check(workers) readonly workers?: number | 'auto';
}
