import fc from 'fast-check';
import { type AdmissionGround, admissionGround } from '../../test/support/admission-ground.js';
import type { AdmissionStore } from './admission.repository.js';
import type { AdmissionLimits } from './fair-share.js';

const PROCESSES = 3;

/**
 * Admission as several kiln processes sharing one Postgres run it: starts, admission passes and
 * releases interleaved at random, up to three at once on connections of their own.
 */
describe('admission across processes', () => {
  let ground: AdmissionGround;

  beforeAll(async () => {
    ground = await admissionGround(PROCESSES);
  });

  afterAll(async () => {
    await ground.close();
  });

  const runningIds = async (): Promise<string[]> =>
    (
      await ground.dataSource.query<Array<{ build_id: string }>>(
        `SELECT build_id FROM build_admissions
          WHERE admitted_at IS NOT NULL AND released_at IS NULL ORDER BY admitted_at, seq`,
      )
    ).map((row) => row.build_id);
  const waitingCount = async (): Promise<number> =>
    (
      await ground.dataSource.query<[{ n: number }]>(
        `SELECT count(*)::int AS n FROM build_admissions
          WHERE admitted_at IS NULL AND released_at IS NULL`,
      )
    )[0].n;

  /** Starts and releases on any process, and keeps count of what each pass admitted. */
  function journal(stores: readonly AdmissionStore[]) {
    const admitted: string[] = [];
    const withdrawn = new Set<string>();
    return {
      admitted,
      withdrawn,
      async admit(process: number, limits: AdmissionLimits): Promise<string[]> {
        const ids = (await stores[process % stores.length]!.admit(limits)).map((b) => b.buildId);
        admitted.push(...ids);
        return ids;
      },
      async release(process: number, buildId: string): Promise<void> {
        const released = await stores[process % stores.length]!.release(buildId);
        if (released === 'waiting') withdrawn.add(buildId);
      },
    };
  }

  it('never runs more than a limit allows, and admits every waiting build once slots free', async () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('start' as const), tenant: fc.nat(), project: fc.nat() }),
      fc.record({ kind: fc.constant('admit' as const) }),
      fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            weight: fc.integer({ min: 1, max: 3 }),
            maxRunning: fc.option(fc.integer({ min: 1, max: 3 }), { nil: null }),
            projects: fc.integer({ min: 1, max: 2 }),
          }),
          { minLength: 2, maxLength: 5 },
        ),
        fc.record(
          {
            maxRunning: fc.integer({ min: 1, max: 4 }),
            tenantMaxRunning: fc.integer({ min: 1, max: 3 }),
            projectMaxRunning: fc.integer({ min: 1, max: 2 }),
          },
          { requiredKeys: ['maxRunning'] },
        ),
        fc.integer({ min: 1, max: PROCESSES }),
        fc.array(fc.array(op, { minLength: 1, maxLength: 3 }), { minLength: 4, maxLength: 16 }),
        async (tenantSettings, limits, processes, batches) => {
          await ground.clear();
          const log = journal(ground.stores.slice(0, processes));
          const tenants = await Promise.all(
            tenantSettings.map(async (settings, i) => {
              const tenantId = await ground.newTenant(`t${i}`, settings);
              const projects = await Promise.all(
                Array.from({ length: settings.projects }, (_, p) =>
                  ground.newProject(tenantId, `p${p}`),
                ),
              );
              return { tenantId, projects, maxRunning: settings.maxRunning };
            }),
          );
          const started: string[] = [];

          const withinLimits = async () => {
            const running = await ground.running();
            expect(running.total).toBeLessThanOrEqual(limits.maxRunning);
            for (const tenant of tenants) {
              const limit = tenant.maxRunning ?? limits.tenantMaxRunning ?? Infinity;
              expect(running.tenants.get(tenant.tenantId) ?? 0).toBeLessThanOrEqual(limit);
            }
            for (const n of running.projects.values()) {
              expect(n).toBeLessThanOrEqual(limits.projectMaxRunning ?? Infinity);
            }
          };

          for (const batch of batches) {
            // Builds are created first; the operations of a batch then run at once.
            const operations = await Promise.all(
              batch.map(async (operation, process) => {
                switch (operation.kind) {
                  case 'start': {
                    const tenant = tenants[operation.tenant % tenants.length]!;
                    const project = tenant.projects[operation.project % tenant.projects.length]!;
                    const buildId = await ground.newBuild(tenant.tenantId, project);
                    started.push(buildId);
                    return () => ground.stores[process % processes]!.enqueue(buildId);
                  }
                  case 'admit':
                    return () => log.admit(process, limits);
                  case 'release': {
                    const buildId = started[operation.pick % Math.max(1, started.length)];
                    return () =>
                      buildId === undefined ? Promise.resolve() : log.release(process, buildId);
                  }
                }
              }),
            );
            await Promise.all(operations.map((run) => run()));
            await withinLimits();
          }

          // Every running build ends, slot after slot, until none waits.
          for (let round = 0; round < started.length + 1 && (await waitingCount()) > 0; round++) {
            for (const buildId of await runningIds()) await log.release(round, buildId);
            await Promise.all(
              Array.from({ length: processes }, (_, process) => log.admit(process, limits)),
            );
            await withinLimits();
          }

          expect(await waitingCount()).toBe(0);
          expect(new Set(log.admitted).size).toBe(log.admitted.length);
          expect([...log.admitted, ...log.withdrawn].sort()).toEqual([...started].sort());
        },
      ),
      { numRuns: 20 },
    );
  });

  describe.each([1, 2])('a tenant behind 20 builds of another, at limit %i', (maxRunning) => {
    const limits = { maxRunning };

    /**
     * a starts 20 builds and fills the limit; b starts 2. Then slots free one at a time: the
     * running build `ends(running)` names ends, and a process admits. Answers b's builds and, for
     * each freed slot, the build that ended and the builds admitted into it.
     */
    async function freeSlots(ends: (running: string[]) => string, count: number) {
      await ground.clear();
      const log = journal(ground.stores);
      const a = await ground.newTenant('a');
      const b = await ground.newTenant('b');
      const aProject = await ground.newProject(a, 'a');
      const bProject = await ground.newProject(b, 'b');
      const start = async (tenant: string, project: string) => {
        const buildId = await ground.newBuild(tenant, project);
        await ground.stores[0]!.enqueue(buildId);
        return buildId;
      };
      for (let i = 0; i < 20; i++) await start(a, aProject);
      await log.admit(0, limits);
      const bBuilds = [await start(b, bProject), await start(b, bProject)];

      const slots: Array<{ ended: string; admitted: string[] }> = [];
      for (let slot = 0; slot < count; slot++) {
        const ended = ends(await runningIds());
        await log.release(slot, ended);
        slots.push({ ended, admitted: await log.admit(slot, limits) });
      }
      return { slots, bBuilds };
    }

    it("admits b's first build into the first freed slot, and its second within two more", async () => {
      // The build running longest ends first.
      const { slots, bBuilds } = await freeSlots((running) => running[0]!, 6);
      const slotOf = (buildId: string) => slots.findIndex((s) => s.admitted.includes(buildId)) + 1;

      expect(slots.map((s) => s.admitted.length)).toEqual([1, 1, 1, 1, 1, 1]);
      expect(slotOf(bBuilds[0]!)).toBe(1);
      expect(slotOf(bBuilds[1]!)).toBeGreaterThan(1);
      expect(slotOf(bBuilds[1]!)).toBeLessThanOrEqual(3);
    });

    it('admits a build of b within two freed slots whenever b runs nothing, whichever build ends', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(fc.nat(), { minLength: 8, maxLength: 8 }), async (picks) => {
          let pick = 0;
          const { slots, bBuilds } = await freeSlots(
            (running) => running[picks[pick++]! % running.length]!,
            picks.length,
          );

          // Replays the slots: from the first freed slot in which b runs nothing while a build
          // of b waits, b is admitted into that slot or the next.
          const bRunning = new Set<string>();
          const bWaiting = new Set(bBuilds);
          let idleSince: number | undefined;
          for (const [slot, { ended, admitted }] of slots.entries()) {
            bRunning.delete(ended);
            if (bRunning.size === 0 && bWaiting.size > 0) idleSince ??= slot;
            if (idleSince !== undefined) expect(slot - idleSince).toBeLessThan(2);
            for (const buildId of admitted.filter((id) => bWaiting.has(id))) {
              bWaiting.delete(buildId);
              bRunning.add(buildId);
              idleSince = undefined;
            }
          }
          expect(slots.map((s) => s.admitted.length)).toEqual(slots.map(() => 1));
        }),
        { numRuns: 10 },
      );
    });
  });
});
