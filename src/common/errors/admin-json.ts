import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DomainError } from './domain-error.js';

/**
 * How deep an admin body may nest (objects and arrays). Every admin DTO is flat; the limit only
 * keeps hostile bodies away from class-transformer, whose recursion overflows the stack near
 * 2,000 levels (a 500 before this limit existed).
 */
export const ADMIN_JSON_MAX_DEPTH = 32;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** The first nesting depth over `limit` reached in `body` (strings honoured), or 0 when none is. */
export function depthOver(body: Buffer, limit: number): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return depth;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return 0;
}

type Done = (err: Error | null, body?: unknown) => void;

/**
 * The admin API's JSON body parser: the nesting depth is checked on the raw bytes before anything
 * parses or validates them (400 `body_too_deep`, naming the limit), then Fastify's own parser runs
 * (prototype-poisoning checks included). Size is limited by Fastify's bodyLimit (413).
 */
export function adminJsonParser(instance: FastifyInstance): (req: FastifyRequest, body: Buffer, done: Done) => void {
  const parse = instance.getDefaultJsonParser('error', 'error');
  return (req, body, done) => {
    if (depthOver(body, ADMIN_JSON_MAX_DEPTH) > 0) {
      return done(
        new DomainError('body_too_deep', `request body nests objects or arrays more than ${ADMIN_JSON_MAX_DEPTH} levels deep (the admin API's limit)`),
      );
    }
    // Fastify's parser calls `done` itself; the catch is for the form of it that returns a promise.
    Promise.resolve(parse(req, body.toString('utf8'), done)).catch((e: unknown) => done(e instanceof Error ? e : new Error(String(e))));
  };
}
