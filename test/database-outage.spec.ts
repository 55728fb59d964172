import { Controller, Get, Module, Post } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { DataSource } from 'typeorm';
import { Public } from '../src/auth/require-permission.decorator.js';
import { KILN_ENTITIES } from '../src/app.entities.js';
import { createApp } from '../src/app.factory.js';
import { loadConfig } from '../src/config/config.js';
import { type Database, openDatabase } from '../src/database/database.js';
import { jsonOf } from './support/http.js';
import { LogCapture } from './support/log-capture.js';
import { killTree } from './support/processes.js';

@Public()
@Controller('notes')
class NotesController {
  constructor(private readonly dataSource: DataSource) {}

  @Post()
  async add(): Promise<void> {
    await this.dataSource.query(`CREATE TABLE IF NOT EXISTS notes (body text)`);
    await this.dataSource.query(`INSERT INTO notes VALUES ('written before the outage')`);
  }

  @Get()
  list(): Promise<unknown[]> {
    return this.dataSource.query('SELECT body FROM notes');
  }
}

@Module({ controllers: [NotesController] })
class NotesModule {}

describe('database outage with the embedded PostgreSQL', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-outage-');
  const logs = new LogCapture('info');
  let database: Database;
  let app: NestExpressApplication;
  let baseUrl: string;

  beforeAll(async () => {
    const config = loadConfig({ KILN_DATA_DIR: dataDir, KILN_RUNNER: 'local' });
    database = await openDatabase(config, logs.logger, { entities: KILN_ENTITIES });
    app = await createApp(config, database.dataSource, logs.logger, {
      extraApiModules: [NotesModule],
    });
    await app.listen(0, '127.0.0.1');
    baseUrl = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await app.close();
    await database.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('answers 503 in the Error shape while PostgreSQL is down, stays up, and recovers with the data', async () => {
    expect((await fetch(`${baseUrl}/api/v1/notes`, { method: 'POST' })).status).toBe(201);
    const pid = database.embedded?.pid;
    expect(pid).toBeDefined();

    killTree(pid!);
    const ready = await fetch(`${baseUrl}/readyz`);
    const read = await fetch(`${baseUrl}/api/v1/notes`);

    expect(ready.status).toBe(503);
    expect(await jsonOf(ready)).toMatchObject({
      code: 'INTERNAL_SERVER_ERROR',
      trace_id: ready.headers.get('x-request-id'),
    });
    expect(read.status).toBe(503);
    expect(await jsonOf(read)).toMatchObject({
      code: 'INTERNAL_SERVER_ERROR',
      error: 'The database is unavailable; retry shortly',
    });
    expect((await fetch(`${baseUrl}/healthz`)).status).toBe(200);
    expect(
      logs.find((l) => l['trace_id'] === read.headers.get('x-request-id') && l['level'] === 'warn'),
    ).toMatchObject({ msg: 'request failed: dependency unavailable', status: 503 });

    const deadline = Date.now() + 20_000;
    let recovered: Response;
    do {
      await new Promise((done) => setTimeout(done, 250));
      recovered = await fetch(`${baseUrl}/api/v1/notes`);
    } while (recovered.status !== 200 && Date.now() < deadline);
    expect(recovered.status).toBe(200);
    expect(await jsonOf(recovered)).toEqual([{ body: 'written before the outage' }]);
    expect((await fetch(`${baseUrl}/readyz`)).status).toBe(200);
  });
});
