import type { MigrationInterface, QueryRunner } from 'typeorm';
import { KILN_ENTITIES } from '../src/app.entities.js';
import { createDataSource, MIGRATIONS_TABLE, runMigrations } from '../src/database/data-source.js';
import { MIGRATIONS } from '../src/database/migrations/index.js';
import { noteFromMigration } from '../src/database/migrations/notes.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { LogCapture } from './support/log-capture.js';

/** A migration that has something to tell whoever runs it. */
class NoteRows1700000000001 implements MigrationInterface {
  name = 'NoteRows1700000000001';
  up(): Promise<void> {
    noteFromMigration({ table: 'widgets', changed: 2 }, 'changed two widgets');
    return Promise.resolve();
  }
  async down(): Promise<void> {}
}

class CreateWidgets1700000000000 implements MigrationInterface {
  name = 'CreateWidgets1700000000000';
  async up(runner: QueryRunner): Promise<void> {
    // Slow enough that two concurrent runners overlap without the lock.
    await runner.query('SELECT pg_sleep(0.2)');
    await runner.query('CREATE TABLE widgets (id int PRIMARY KEY)');
  }
  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE widgets');
  }
}

describe(runMigrations.name, () => {
  const logs = new LogCapture('info');
  let database: TestDatabase;

  beforeEach(async () => {
    database = await createTestDatabase();
  });

  afterEach(async () => {
    await database.drop();
  });

  function dataSource() {
    return createDataSource({
      url: database.url,
      logger: logs.logger,
      entities: KILN_ENTITIES,
      migrations: [...MIGRATIONS, CreateWidgets1700000000000],
    });
  }

  it('applies a pending migration once and records it', async () => {
    const ds = await dataSource().initialize();

    const first = await runMigrations(ds, logs.logger);
    const second = await runMigrations(ds, logs.logger);

    expect(first).toEqual(['CreateWidgets1700000000000']);
    expect(second).toEqual([]);
    expect(
      await ds.query(`SELECT name FROM ${MIGRATIONS_TABLE} WHERE name = $1`, [
        'CreateWidgets1700000000000',
      ]),
    ).toHaveLength(1);
    await ds.destroy();
  });

  it("logs what a migration says about the rows it changed, as a warning of the run's logger", async () => {
    const capture = new LogCapture('info');
    const ds = await createDataSource({
      url: database.url,
      logger: capture.logger,
      entities: KILN_ENTITIES,
      migrations: [...MIGRATIONS, NoteRows1700000000001],
    }).initialize();

    await runMigrations(ds, capture.logger);

    expect(capture.find((line) => line['msg'] === 'changed two widgets')).toMatchObject({
      level: 'warn',
      table: 'widgets',
      changed: 2,
    });
    await ds.destroy();
  });

  it('lets replicas that start together migrate exactly once', async () => {
    const [a, b] = await Promise.all([dataSource().initialize(), dataSource().initialize()]);

    const results = await Promise.all([
      runMigrations(a, logs.logger),
      runMigrations(b, logs.logger),
    ]);

    expect(results.flat()).toEqual(['CreateWidgets1700000000000']);
    await Promise.all([a.destroy(), b.destroy()]);
  });

  it('never creates tables by synchronising entities', () => {
    expect(dataSource().options.synchronize).toBe(false);
  });
});
