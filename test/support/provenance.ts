import { Ajv, type ValidateFunction } from 'ajv';
import ajvFormats from 'ajv-formats';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { jsonOf } from './http.js';
import type { ApiClient } from './builds.js';

const SCHEMAS = join(__dirname, '..', 'fixtures', 'provenance', 'schemas');
const SCHEMA_BASE = 'https://kiln.dev/test/schemas/';

let validators: { statement: ValidateFunction; provenance: ValidateFunction } | undefined;

/**
 * The vendored in-toto Statement v1 and SLSA Provenance v1 JSON schemas
 * (test/fixtures/provenance/schemas/README.md), compiled once.
 */
export function provenanceSchemas(): { statement: ValidateFunction; provenance: ValidateFunction } {
  if (validators !== undefined) return validators;
  const ajv = new Ajv({ allErrors: true });
  // ajv-formats is CommonJS: its plugin is the module's `default` under Node's ESM interop.
  ajvFormats.default(ajv);
  for (const file of ['in-toto-statement-v1.schema.json', 'slsa-provenance-v1.schema.json']) {
    ajv.addSchema(JSON.parse(readFileSync(join(SCHEMAS, file), 'utf8')) as object);
  }
  validators = {
    statement: ajv.getSchema(`${SCHEMA_BASE}in-toto-statement-v1.schema.json`)!,
    provenance: ajv.getSchema(`${SCHEMA_BASE}slsa-provenance-v1.schema.json`)!,
  };
  return validators;
}

/**
 * The problems of a statement against both schemas (the predicate against SLSA's when it is a
 * provenance): empty when it is valid, so a failing expectation shows them.
 */
export function statementProblems(statement: unknown): unknown[] {
  const { statement: ofStatement, provenance } = provenanceSchemas();
  const problems: unknown[] = [];
  if (!ofStatement(statement)) problems.push(...(ofStatement.errors ?? []));
  const { predicate, predicateType } = statement as { predicate?: unknown; predicateType?: string };
  if (predicateType === 'https://slsa.dev/provenance/v1' && !provenance(predicate)) {
    problems.push(...(provenance.errors ?? []));
  }
  return problems;
}

/** The statement a bundle's DSSE envelope carries. */
export function statementOf(bundle: { dsseEnvelope: { payload: string } }): any {
  return JSON.parse(Buffer.from(bundle.dsseEnvelope.payload, 'base64').toString('utf8'));
}

/**
 * The log digest of docs/provenance.md, recomputed from GET /builds/{id}/logs pages alone: lines
 * 0 … lines-1, each `JSON.stringify([timestamp, level, message, sortedMetadata]) + "\n"`.
 */
export async function logDigestFromPages(
  client: ApiClient,
  buildId: string,
  lines: number,
  pageSize = 37,
): Promise<string> {
  const hash = createHash('sha256');
  for (let offset = 0; offset < lines; offset += pageSize) {
    const page = await jsonOf(
      await client.request('GET', `/builds/${buildId}/logs?offset=${offset}&limit=${pageSize}`),
    );
    for (const entry of page.logs.slice(0, lines - offset)) {
      const metadata =
        entry.metadata === null
          ? null
          : Object.fromEntries(
              Object.keys(entry.metadata)
                .sort()
                .map((key) => [key, entry.metadata[key]]),
            );
      hash.update(
        `${JSON.stringify([entry.timestamp, entry.level, entry.message, metadata])}\n`,
        'utf8',
      );
    }
  }
  return hash.digest('hex');
}

const MANIFEST_TYPES = [
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
].join(', ');

/** A manifest or index from a plain-HTTP registry, with the digest of its bytes. */
export async function registryManifest(
  address: string,
  repository: string,
  reference: string,
): Promise<{ status: number; json: any; digest: string }> {
  const response = await fetch(`http://${address}/v2/${repository}/manifests/${reference}`, {
    headers: { accept: MANIFEST_TYPES },
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  return {
    status: response.status,
    json: response.status === 200 ? JSON.parse(bytes.toString('utf8')) : undefined,
    digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`,
  };
}

/** A blob's bytes from a plain-HTTP registry. */
export async function registryBlob(
  address: string,
  repository: string,
  digest: string,
): Promise<Buffer> {
  const response = await fetch(`http://${address}/v2/${repository}/blobs/${digest}`);
  if (response.status !== 200) throw new Error(`blob ${digest}: ${response.status}`);
  return Buffer.from(await response.arrayBuffer());
}
