import type { NestExpressApplication } from '@nestjs/platform-express';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { KILN_ENTITIES } from '../src/app.entities.js';
import { createApp } from '../src/app.factory.js';
import { loadConfig } from '../src/config/config.js';
import { type Database, openDatabase } from '../src/database/database.js';
import { LogCapture } from './support/log-capture.js';
import { isAlive, killTree } from './support/processes.js';

const ROOT = join(__dirname, '..');

/**
 * The first kiln: a process of its own that starts the embedded PostgreSQL from the TypeScript
 * sources (compiled on the fly by @swc/core, which jest uses too) and prints the postmaster's pid.
 */
const FIRST_KILN = `
require('./test/support/resolve-js-suffix.cjs');
const { readFileSync } = require('node:fs');
const { transformSync } = require('@swc/core');
require.extensions['.ts'] = (module, filename) => {
  const options = { filename, jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } };
  module._compile(transformSync(readFileSync(filename, 'utf8'), options).code, filename);
};
const { EmbeddedPostgres } = require('./src/database/embedded-postgres.ts');
EmbeddedPostgres.open({ dataDir: process.env.KILN_DATA_DIR, logger: require('pino')({ level: 'silent' }) }).then(
  (server) => process.stdout.write(JSON.stringify({ pid: server.pid }) + '\\n'),
  (error) => { process.stderr.write(String(error.stack)); process.exit(1); },
);
setInterval(() => undefined, 1 << 30);
`;

async function eventually(probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((done) => setTimeout(done, 200));
  }
}

describe('an embedded PostgreSQL adopted after kiln restarted', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-adopted-');
  const logs = new LogCapture('info');
  let first: ChildProcess;
  let postmaster: number;
  let database: Database;
  let app: NestExpressApplication;
  let baseUrl: string;

  beforeAll(async () => {
    first = spawn('node', ['-e', FIRST_KILN], {
      cwd: ROOT,
      env: { ...process.env, KILN_DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [line] = await createInterface({ input: first.stdout! })
      [Symbol.asyncIterator]()
      .next()
      .then((r) => [r.value as string]);
    postmaster = (JSON.parse(line!) as { pid: number }).pid;
    // kiln dies without stopping its server, as on SIGKILL or an OOM kill.
    const gone = new Promise((done) => first.once('exit', done));
    first.kill('SIGKILL');
    await gone;
    expect(isAlive(postmaster)).toBe(true);

    const config = loadConfig({ KILN_DATA_DIR: dataDir, KILN_RUNNER: 'local' });
    database = await openDatabase(config, logs.logger, { entities: KILN_ENTITIES });
    app = await createApp(config, database.dataSource, logs.logger);
    await app.listen(0, '127.0.0.1');
    baseUrl = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    await database?.close();
    if (first.exitCode === null && first.signalCode === null) first.kill('SIGKILL');
    if (isAlive(postmaster)) killTree(postmaster);
    await rm(dataDir, { recursive: true, force: true });
  });

  it('starts the adopted server again when it dies, and /readyz answers 200 again with the data', async () => {
    expect(database.embedded?.owned).toBe(false);
    await database.dataSource.query('CREATE TABLE kept (value text)');
    await database.dataSource.query(`INSERT INTO kept VALUES ('written before the crash')`);

    killTree(postmaster);
    await eventually(async () => (await fetch(`${baseUrl}/readyz`)).status === 503, 5_000);

    await eventually(async () => (await fetch(`${baseUrl}/readyz`)).status === 200);
    await expect(database.dataSource.query('SELECT value FROM kept')).resolves.toEqual([
      { value: 'written before the crash' },
    ]);
    expect(database.embedded?.owned).toBe(true);
    expect(database.embedded?.pid).not.toBe(postmaster);
    expect(
      logs.find((l) => l['msg'] === 'adopted embedded PostgreSQL is gone; starting it again'),
    ).toMatchObject({ level: 'error', pid: postmaster });
  }, 60_000);
});
