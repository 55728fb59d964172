// What the HTTP benches (api.bench.mjs, admission.bench.mjs) stand on: a temporary directory, an
// embedded PostgreSQL with a raw client, and the process that runs the HTTP clients
// (api-clients.mjs); each closed in reverse order, once.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import pg from 'pg';
import { startClients } from './client-process.mjs';
import { startPostgres } from './kiln-process.mjs';

export class HttpBenchGround {
  constructor() {
    this.closers = [];
  }

  /** Runs the closers in reverse order, once, also on failure or ^C. */
  close() {
    return (this.closed ??= (async () => {
      for (const close of this.closers.splice(0).reverse()) await close().catch(() => undefined);
    })());
  }

  /** Sets up `tmp` (named after `name`), `postgres`, `raw` and `clients`. */
  async open(name) {
    this.tmp = await mkdtemp(`${tmpdir()}/kiln-${name}-`);
    this.closers.push(() => rm(this.tmp, { recursive: true, force: true }));
    this.postgres = await startPostgres();
    this.closers.push(() => this.postgres.close());
    this.raw = new pg.Client({ connectionString: this.postgres.url });
    await this.raw.connect();
    this.closers.push(() => this.raw.end());
    this.clients = startClients(new URL('./api-clients.mjs', import.meta.url));
    this.closers.push(async () => this.clients.close());
  }
}
