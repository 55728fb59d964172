import pg from 'pg';
import type { DataSource } from 'typeorm';
import { databaseText } from './leaks.js';

interface Output {
  readonly where: string;
  readonly text: string;
  /** For a fetched response: the origin it came from. */
  readonly origin?: string;
}

/** Where one registered credential was found, and in which form. */
export interface CredentialLeak {
  readonly where: string;
  readonly credential: string;
  readonly form: string;
}

/**
 * The property of issue 27 that holds across a suite: no response body, log line, CLI output or
 * error message the suite produced contains a credential the suite registered, in any common
 * form. A suite registers each credential where it makes it, the audit records what the suite
 * saw, and `leaks()` (or `auditCredentials`, which checks at the end of the suite) scans it all.
 *
 * What is recorded: every response body kiln's server gave to the global `fetch` while the audit
 * watches (the suite's HTTP clients all use it; `kilnOrigin` names the server, so what a fake
 * vendor answered kiln itself is not kiln's output), what the suite passes to `record` (CLI
 * output, kiln's own log lines, Kubernetes objects), and at the end every row of kiln's database
 * (build log lines, error messages and anything else stored).
 */
export class CredentialAudit {
  private readonly credentials = new Map<string, Map<string, string>>();
  private readonly outputs: Output[] = [];
  private restoreFetch: (() => void) | undefined;
  private readonly kilnOrigins = new Set<string>();

  /** Registers `value` (and its encoded forms) as a credential; answers it, to use inline. */
  register(value: string): string {
    if (value.length < 6) throw new Error(`a credential this short cannot be audited: ${value}`);
    this.credentials.set(value, formsOf(value));
    return value;
  }

  /** A user name and password, as HTTP Basic sends them: the password, the pair and its base64. */
  registerPair(username: string, password: string): void {
    this.register(password);
    const pair = `${username}:${password}`;
    const forms = formsOf(pair);
    // The pair's base64 is what an echoed `Authorization: Basic …` holds.
    forms.set(`base64 of ${username}:…`, Buffer.from(pair).toString('base64').replace(/=+$/, ''));
    this.credentials.set(pair, forms);
  }

  record(where: string, text: string, origin?: string): void {
    this.outputs.push({ where, text, ...(origin === undefined ? {} : { origin }) });
  }

  /** Responses from `baseUrl`'s origin are kiln's output (any number of kiln servers). */
  kilnOrigin(baseUrl: string): void {
    this.kilnOrigins.add(new URL(baseUrl).origin);
  }

  /** Records the body of every response the global fetch returns until `stopWatching`. */
  watchFetch(): void {
    if (this.restoreFetch !== undefined) return;
    const original = globalThis.fetch;
    const wrapped = async (...args: Parameters<typeof fetch>): Promise<Response> => {
      const response = await original(...args);
      const url = requestLabel(args[0]);
      const where = `response to ${url}`;
      const origin = URL.canParse(url) ? new URL(url).origin : url;
      // A clone, read on the side: the caller reads its own copy as it would have.
      response
        .clone()
        .text()
        .then(
          (text) => this.record(where, text, origin),
          () => undefined,
        );
      this.record(`${where} headers`, JSON.stringify([...response.headers]), origin);
      return response;
    };
    globalThis.fetch = wrapped;
    this.restoreFetch = () => {
      globalThis.fetch = original;
    };
  }

  stopWatching(): void {
    this.restoreFetch?.();
    this.restoreFetch = undefined;
  }

  /**
   * Records every row of kiln's database (build log lines, error messages, settings, …): through
   * kiln's DataSource, or a database URL when the suite has no DataSource of its own.
   */
  async recordDatabase(database: DataSource | string): Promise<void> {
    if (typeof database !== 'string') {
      if (database.isInitialized) this.record('the database', await databaseText(database));
      return;
    }
    const client = new pg.Client({ connectionString: database });
    await client.connect();
    try {
      const query = async (sql: string) => (await client.query(sql)).rows as never;
      this.record('the database', await databaseText({ query }));
    } finally {
      await client.end();
    }
  }

  /** Every place a registered credential shows, in any of its forms. */
  leaks(): CredentialLeak[] {
    const found: CredentialLeak[] = [];
    for (const output of this.outputs) {
      if (output.origin !== undefined && !this.kilnOrigins.has(output.origin)) continue;
      for (const [credential, forms] of this.credentials) {
        for (const [form, text] of forms) {
          if (output.text.includes(text)) found.push({ where: output.where, credential, form });
        }
      }
    }
    return found;
  }

  get credentialCount(): number {
    return this.credentials.size;
  }

  /** Responses from kiln's servers recorded so far. */
  get kilnResponseCount(): number {
    return this.outputs.filter((o) => o.origin !== undefined && this.kilnOrigins.has(o.origin))
      .length;
  }
}

/**
 * A CredentialAudit for the surrounding `describe`: it watches fetch from the suite's start and,
 * when the suite ends, records what `atEnd` gives (kiln's database, its log lines…) and fails the
 * suite on any leak. Call it at the top of the describe, before the suite's own hooks, so its
 * end runs after theirs have recorded what they see but before they close kiln.
 */
export function auditCredentials(
  atEnd: (audit: CredentialAudit) => Promise<void>,
): CredentialAudit {
  const audit = new CredentialAudit();
  beforeAll(() => audit.watchFetch());
  afterAll(async () => {
    audit.stopWatching();
    await atEnd(audit);
    // Reads of response bodies run on the side: let them land.
    await new Promise((done) => setImmediate(done));
    expect(audit.credentialCount).toBeGreaterThan(0);
    expect(audit.kilnResponseCount).toBeGreaterThan(0);
    expect(audit.leaks()).toEqual([]);
  });
  return audit;
}

/** The forms a credential may show in, by name; a form that reads as an earlier one is left out. */
function formsOf(value: string): Map<string, string> {
  const forms = new Map<string, string>();
  const candidates: Array<[string, string]> = [
    ['raw', value],
    ['base64', Buffer.from(value).toString('base64').replace(/=+$/, '')],
    ['base64url', Buffer.from(value).toString('base64url')],
    ['URL-encoded', encodeURIComponent(value)],
    ['JSON-escaped', JSON.stringify(value).slice(1, -1)],
  ];
  for (const [name, text] of candidates) {
    if (![...forms.values()].includes(text)) forms.set(name, text);
  }
  return forms;
}

function requestLabel(input: Parameters<typeof fetch>[0]): string {
  if (typeof input === 'string') return input;
  if (input instanceof URL) return input.href;
  return input.url;
}
