import type { NextFunction, Request, Response } from 'express';
import { type ErrorDetails, InvalidRequestError } from './errors.js';

export const NUL_PROBLEM = 'must not contain NUL characters (U+0000)';
export const SURROGATE_PROBLEM = 'must not contain unpaired UTF-16 surrogates';

/** Details listed for one request at most: a hostile body must not make a huge error body. */
const MAX_PROBLEMS = 20;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why PostgreSQL could not store `text`, or undefined when it can. `text` columns refuse NUL and
 * `jsonb` refuses both NUL and `\uD800`-style escapes of unpaired surrogates; in a `text` column an
 * unpaired surrogate would silently become U+FFFD.
 */
export function textProblem(text: string): string | undefined {
  if (text.includes('\u0000')) return NUL_PROBLEM;
  if (LONE_SURROGATE.test(text)) return SURROGATE_PROBLEM;
  return undefined;
}

/**
 * Every string and object key in a parsed JSON value (or a parsed query string) that PostgreSQL
 * could not store, keyed by field path as in validation details (`manifest.metadata.labels.1`); a
 * bad key is named by its path with the offending characters escaped. Walks without recursion.
 */
export function unstorableText(value: unknown, root = 'body'): ErrorDetails {
  const details: ErrorDetails = {};
  let found = 0;
  const pending: Array<{ path: string; value: unknown }> = [{ path: '', value }];
  for (let next = pending.pop(); next !== undefined && found < MAX_PROBLEMS; next = pending.pop()) {
    const { path, value: current } = next;
    if (typeof current === 'string') {
      const problem = textProblem(current);
      if (problem !== undefined) {
        details[path === '' ? root : path] = problem;
        found++;
      }
    } else if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) {
        pending.push({ path: join(path, String(i)), value: current[i] as unknown });
      }
    } else if (typeof current === 'object' && current !== null) {
      for (const [key, entry] of Object.entries(current).reverse()) {
        const problem = textProblem(key);
        if (problem === undefined) {
          pending.push({ path: join(path, key), value: entry });
        } else {
          details[join(path, escaped(key))] = problem;
          found++;
        }
      }
    }
  }
  return details;
}

/**
 * Express middleware, after the JSON body parser: refuses a request whose query string or body
 * holds text PostgreSQL cannot store, before any handler sees it. Headers need no check: Node's
 * parser refuses control characters in them and decodes them as Latin-1, so they hold neither.
 */
export function refuseUnstorableText(req: Request, _res: Response, next: NextFunction): void {
  const details = { ...unstorableText(req.query, 'query'), ...unstorableText(req.body) };
  if (Object.keys(details).length === 0) {
    next();
    return;
  }
  next(InvalidRequestError.listing('The request holds text that cannot be stored', details));
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}

/** A key as JSON would write it, without the quotes: `\u0000`, `\udc00` stay readable. */
function escaped(key: string): string {
  return JSON.stringify(key).slice(1, -1);
}
