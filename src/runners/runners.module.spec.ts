import type { Type } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { Test, type TestingModule } from '@nestjs/testing';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DataSource } from 'typeorm';
import { TEST_JWT_SECRET, TEST_SECRETS_KEY } from '../../test/support/auth.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/database.js';
import { kubeconfigYaml } from '../../test/support/kube/kubeconfig.js';
import { LogCapture } from '../../test/support/log-capture.js';
import { KILN_ENTITIES } from '../app.entities.js';
import { AppModule } from '../app.module.js';
import { loadConfig } from '../config/config.js';
import { createDataSource } from '../database/data-source.js';
import { BuildRunner } from './build-runner.js';
import { KubernetesRunner } from './kubernetes/kubernetes.runner.js';
import { LocalRunner } from './local/local.runner.js';

describe('RunnersModule', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  const dir = mkdtempSync(join(tmpdir(), 'kiln-runners-'));
  const kubeconfig = join(dir, 'kubeconfig');

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = createDataSource({
      url: database.url,
      logger: new LogCapture().logger,
      entities: KILN_ENTITIES,
    });
    await dataSource.initialize();
    // Nothing listens there: the client connects on its first request, and none is made.
    writeFileSync(kubeconfig, kubeconfigYaml('http://127.0.0.1:9'));
  });

  afterAll(async () => {
    await dataSource.destroy();
    await database.drop();
    await rm(dir, { recursive: true, force: true });
  });

  /** The runners of every kind Nest made for kiln's api role with that KILN_RUNNER. */
  async function runnersOf(
    runner: 'local' | 'kubernetes',
  ): Promise<{ bound: BuildRunner; made: unknown[] }> {
    const config = loadConfig(
      {
        KILN_JWT_SECRET: TEST_JWT_SECRET,
        KILN_SECRETS_KEY: TEST_SECRETS_KEY,
        KILN_ROLE: 'api',
        KILN_RUNNER: runner,
        KUBECONFIG: kubeconfig,
        KILN_DATA_DIR: dir,
        DATABASE_URL: database.url,
      },
      dir,
      dir,
    );
    const module: TestingModule = await Test.createTestingModule({
      imports: [AppModule.forRoot(config, dataSource, new LogCapture().logger)],
    }).compile();
    try {
      const made = [...module.get(ModulesContainer).values()]
        .flatMap((nestModule) => [...nestModule.providers.values()])
        .map((wrapper) => wrapper.instance)
        .filter(
          (instance) => instance instanceof LocalRunner || instance instanceof KubernetesRunner,
        );
      return { bound: module.get(BuildRunner), made };
    } finally {
      await module.close();
    }
  }

  it.each<[string, 'local' | 'kubernetes', Type<BuildRunner>]>([
    ['LocalRunner', 'local', LocalRunner],
    ['KubernetesRunner', 'kubernetes', KubernetesRunner],
  ])('binds %s alone when KILN_RUNNER=%s: no other runner is made', async (_, kind, runner) => {
    const { bound, made } = await runnersOf(kind);

    expect(bound).toBeInstanceOf(runner);
    expect(made.map((instance) => (instance as object).constructor.name)).toEqual([runner.name]);
    expect(made[0]).toBe(bound);
  });
});
