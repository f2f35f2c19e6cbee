/**
 * OpenSSH `known_hosts` checking for the ssh transport: plain entries (`host,host2 type base64`),
 * `[host]:port` entries for non-22 ports, hashed entries (`|1|salt|hmac`), `*`/`?` wildcards,
 * `!negated` patterns and `@revoked` lines (`@cert-authority` lines are ignored).
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';

/** The outcome of looking an offered host key up in a known_hosts text. */
export type KnownHostsVerdict =
  | { readonly kind: 'match'; readonly line: number }
  | { readonly kind: 'unknown' }
  /** The host is recorded, but with other key(s): `lines` and their key types. */
  | { readonly kind: 'mismatch'; readonly lines: readonly number[]; readonly recordedTypes: readonly string[] }
  | { readonly kind: 'revoked'; readonly line: number };

/** The name OpenSSH looks up: `host` on port 22, else `[host]:port` (lower-cased, no brackets). */
export function knownHostsName(host: string, port: number): string {
  const bare = host.toLowerCase();
  return port === 22 ? bare : `[${bare}]:${port}`;
}

/** `SHA256:<base64 without padding>` of an ssh wire-format public key, as `ssh-keygen -l` prints. */
export function fingerprintSha256(keyBlob: Buffer): string {
  return `SHA256:${createHash('sha256').update(keyBlob).digest('base64').replace(/=+$/, '')}`;
}

/** The key type named inside an ssh wire-format public key (`ssh-ed25519`, ...), or '' if malformed. */
export function keyTypeOfBlob(keyBlob: Buffer): string {
  if (keyBlob.length < 4) return '';
  const len = keyBlob.readUInt32BE(0);
  if (len > 64 || 4 + len > keyBlob.length) return '';
  return keyBlob.subarray(4, 4 + len).toString('latin1');
}

function wildcardMatch(pattern: string, name: string): boolean {
  let re = '^';
  for (const ch of pattern) {
    if (ch === '*') re += '.*';
    else if (ch === '?') re += '.';
    else re += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`${re}$`).test(name);
}

function hashedMatch(entry: string, name: string): boolean {
  // |1|<base64 salt>|<base64 HMAC-SHA1(salt, name)>
  const parts = entry.split('|');
  if (parts.length !== 4 || parts[1] !== '1') return false;
  const salt = Buffer.from(parts[2], 'base64');
  const expected = Buffer.from(parts[3], 'base64');
  const actual = createHmac('sha1', salt).update(name).digest();
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/** Whether the host field of a line names `name` (negations win over positive patterns). */
export function hostFieldMatches(field: string, name: string): boolean {
  if (field.startsWith('|')) return hashedMatch(field, name);
  let positive = false;
  for (const raw of field.split(',')) {
    const negated = raw.startsWith('!');
    const pattern = (negated ? raw.slice(1) : raw).toLowerCase();
    if (pattern === '' || !wildcardMatch(pattern, name)) continue;
    if (negated) return false;
    positive = true;
  }
  return positive;
}

/**
 * Look `keyBlob`, offered by `host` on `port`, up in the text of a known_hosts file.
 * A key matches when the line's type and its decoded key bytes equal the offered key's.
 */
export function checkKnownHosts(text: string, host: string, port: number, keyBlob: Buffer): KnownHostsVerdict {
  const name = knownHostsName(host, port);
  const offeredType = keyTypeOfBlob(keyBlob);
  let match: number | null = null;
  const otherLines: number[] = [];
  const otherTypes = new Set<string>();
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === '' || line.startsWith('#')) continue;
    const fields = line.split(/\s+/);
    let marker: string | undefined;
    if (fields[0].startsWith('@')) marker = fields.shift();
    if (marker === '@cert-authority' || fields.length < 3) continue;
    const [hostField, type, base64] = fields;
    if (!hostFieldMatches(hostField, name)) continue;
    const sameBytes = Buffer.from(base64, 'base64').equals(keyBlob);
    if (marker === '@revoked') {
      if (sameBytes) return { kind: 'revoked', line: i + 1 };
      continue;
    }
    const sameKey = sameBytes && type === offeredType;
    if (marker !== undefined) continue; // unknown marker: ignore the line, as OpenSSH does
    if (sameKey) match ??= i + 1;
    else {
      otherLines.push(i + 1);
      otherTypes.add(type);
    }
  }
  if (match !== null) return { kind: 'match', line: match };
  if (otherLines.length > 0) return { kind: 'mismatch', lines: otherLines, recordedTypes: [...otherTypes] };
  return { kind: 'unknown' };
}

/** The text of a known_hosts file, or null when it does not exist. */
export async function readKnownHosts(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Why a host key was not accepted, and how an operator fixes it. */
export interface HostKeyRejection {
  readonly problem: string;
  readonly fix: string;
}

/**
 * Check the key a host offered against the known_hosts `file`; null when it is recorded there.
 * `where` names the host in messages. Messages carry the offered key's fingerprint, never more.
 */
export async function checkHostKey(opts: {
  readonly file: string;
  readonly host: string;
  readonly port: number;
  readonly where: string;
  readonly key: Buffer;
}): Promise<HostKeyRejection | null> {
  const { file, host, port, where, key } = opts;
  const text = await readKnownHosts(file);
  const verdict: KnownHostsVerdict = text === null ? { kind: 'unknown' } : checkKnownHosts(text, host, port, key);
  const offered = `${keyTypeOfBlob(key)} key ${fingerprintSha256(key)}`;
  const name = knownHostsName(host, port);
  switch (verdict.kind) {
    case 'match':
      return null;
    case 'unknown':
      return {
        problem: `host key of ${where} is not known: ${name} has no entry in ${file}${text === null ? ' (file does not exist)' : ''}; it offered ${offered}`,
        fix: `verify that fingerprint out of band, then add the key with \`ssh-keyscan -p ${port} ${host} >> ${file}\``,
      };
    case 'revoked':
      return {
        problem: `host key of ${where} (${offered}) is marked @revoked in ${file} line ${verdict.line}`,
        fix: 'the host must be given a new key',
      };
    case 'mismatch':
      return {
        problem: `host key of ${where} does NOT match ${file} line(s) ${verdict.lines.join(', ')} (recorded ${verdict.recordedTypes.join(', ')}); it offered ${offered} — possible man-in-the-middle attack, or the host was reinstalled`,
        fix: `if the change is expected, remove the old entry with \`ssh-keygen -R '${name}' -f ${file}\` and add the new key`,
      };
  }
}
