import type { IncomingMessage, ServerResponse } from 'node:http';
import { InvalidRequestError } from './errors.js';

/**
 * How deep a JSON body may nest arrays and objects; the body itself is level 1. A wizard manifest
 * uses 5 levels for its own structure (body, manifest, build_config, builders, a builder), which
 * leaves ~60 for free-form metadata and packer fragments.
 */
export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * True when JSON text (UTF-8 bytes) nests arrays and objects deeper than `max` levels. One pass
 * without recursion that stops at the first level too deep; brackets inside strings do not count.
 * Malformed text is not judged here: JSON.parse refuses it afterwards.
 */
export function nestsDeeperThan(json: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const byte = json[i];
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) {
      inString = true;
    } else if (byte === OPEN_BRACKET || byte === OPEN_BRACE) {
      if (++depth > max) return true;
    } else if (byte === CLOSE_BRACKET || byte === CLOSE_BRACE) {
      depth--;
    }
  }
  return false;
}

/**
 * Options for Express's JSON body parser: the size limit, and a check of the raw bytes before
 * JSON.parse runs. Too deep a body is refused there, before parsing (which takes ~200 ms for a
 * 1 MiB body of nested brackets) and before class-transformer, which recurses and would overflow
 * the stack. Bodies must be UTF-8 (RFC 8259 section 8.1); the scan relies on it, since brackets,
 * quotes and backslashes never occur inside a multi-byte UTF-8 sequence.
 *
 * `verify` is the hook Nest reserves for `rawBody: true`, which kiln does not use.
 */
export function jsonBodyOptions(limit: number): {
  limit: number;
  type: (req: IncomingMessage) => boolean;
  verify: (req: IncomingMessage, res: ServerResponse, body: Buffer, encoding: string) => void;
} {
  return {
    limit,
    type: (req) => isJsonContent(req) && !isArtifactUpload(req) && !isWebhookDelivery(req),
    verify: (_req, _res, body, encoding) => checkJsonBody(body, encoding),
  };
}

/** body-parser's default for `json()`: `application/json`, with or without parameters. */
function isJsonContent(req: IncomingMessage): boolean {
  return /^application\/json\s*(?:;|$)/i.test(req.headers['content-type'] ?? '');
}

/**
 * `PUT /api/v1/builds/{id}/sbom|scan`: a build pod's upload, read by its own route with its own
 * byte limit (docs/adr/0034-artifact-uploads.md) rather than by this parser's; the route applies
 * the same depth limit (refuseDeepJson).
 */
export function isArtifactUpload(req: IncomingMessage): boolean {
  return (
    req.method === 'PUT' && /^\/api\/v1\/builds\/[^/?]+\/(?:sbom|scan)(?:\?|$)/.test(req.url ?? '')
  );
}

/**
 * `POST /api/v1/hooks/{id}`: a git host's webhook delivery, whose signature is over the raw bytes;
 * its route reads the body itself and verifies it before parsing (docs/adr/0053-triggers.md).
 */
export function isWebhookDelivery(req: IncomingMessage & { originalUrl?: string }): boolean {
  return (
    req.method === 'POST' &&
    /^\/api\/v1\/hooks\/[^/?]+\/?(?:\?|$)/.test(req.originalUrl ?? req.url ?? '')
  );
}

function checkJsonBody(body: Buffer, encoding: string): void {
  if (encoding.toLowerCase() !== 'utf-8') {
    throw new InvalidRequestError('JSON request bodies must be encoded as UTF-8', {
      'Content-Type': 'charset must be utf-8',
    });
  }
  refuseDeepJson(body);
}

/**
 * The 400 of a JSON body nested deeper than MAX_JSON_DEPTH. The body parser applies it to every
 * JSON body; the upload routes, which read their own bodies, apply it to theirs.
 */
export function refuseDeepJson(body: Uint8Array): void {
  if (nestsDeeperThan(body, MAX_JSON_DEPTH)) {
    throw new InvalidRequestError(
      `The request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`,
      { body: `must not nest arrays and objects deeper than ${MAX_JSON_DEPTH} levels` },
    );
  }
}
