import fc from 'fast-check';
import { type AdmissionGround, admissionGround } from '../../test/support/admission-ground.js';
import { AdmissionStore } from './admission.repository.js';
import { type AdmissionLimits, queueOrder } from './fair-share.js';

/** Medium tests: AdmissionStore on a real migrated Postgres. */
describe(AdmissionStore.name, () => {
  let ground: AdmissionGround;
  let store: AdmissionStore;

  beforeAll(async () => {
    ground = await admissionGround(3);
    store = ground.stores[0]!;
  });

  afterEach(async () => {
    await ground.clear();
  });

  afterAll(async () => {
    await ground.close();
  });

  /** A tenant with one project, and a function that starts (enqueues) builds in it. */
  async function tenant(name: string, settings?: { weight?: number; maxRunning?: number | null }) {
    const tenantId = await ground.newTenant(name, settings);
    const projectId = await ground.newProject(tenantId, `${name}-web`);
    const start = async (count = 1, project = projectId): Promise<string[]> => {
      const ids: string[] = [];
      for (let i = 0; i < count; i++) {
        const id = await ground.newBuild(tenantId, project);
        await store.enqueue(id);
        ids.push(id);
      }
      return ids;
    };
    return { tenantId, projectId, start };
  }

  const row = async (buildId: string) =>
    (
      await ground.dataSource.query<
        Array<{ queued_at: Date; admitted_at: Date | null; released_at: Date | null; seq: string }>
      >(
        'SELECT queued_at, admitted_at, released_at, seq FROM build_admissions WHERE build_id = $1',
        [buildId],
      )
    )[0];
  /** Resolves once `count` backends of this database wait for a lock, or `done()`. */
  async function untilWaiting(count: number, done = () => false): Promise<void> {
    for (;;) {
      const [{ n }] = await ground.dataSource.query<[{ n: number }]>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      if (n >= count || done()) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  /** Where a waiting build stands (`places` of it alone); undefined when it does not wait. */
  const waiting = async (buildId: string, limits: AdmissionLimits) => {
    const place = (await store.places([buildId], limits)).get(buildId);
    return place === undefined ? undefined : { position: place.position, reason: place.reason };
  };
  const admittedIds = async (limits: AdmissionLimits) =>
    (await store.admit(limits)).map((build) => build.buildId);

  describe('enqueue', () => {
    it("records a waiting build with its build's tenant and project", async () => {
      const { tenantId, projectId } = await tenant('one');
      const buildId = await ground.newBuild(tenantId, projectId);

      expect((await store.enqueue(buildId))?.kind).toBe('waiting');
      expect(await row(buildId)).toMatchObject({ admitted_at: null, released_at: null });
      expect((await ground.snapshot()).waiting).toEqual([
        expect.objectContaining({ buildId, tenantId, projectId }),
      ]);
    });

    it('changes nothing when called again for the same build', async () => {
      const [buildId] = await (await tenant('again')).start();
      const before = await row(buildId!);

      expect(await store.enqueue(buildId!)).toBeUndefined();
      expect(await row(buildId!)).toEqual(before);
    });

    it('admits a build at once when asked, unless a tenant has a limit of its own', async () => {
      const free = await tenant('free');
      const first = await ground.newBuild(free.tenantId, free.projectId);

      expect((await store.enqueue(first, true))?.kind).toBe('admitted');
      expect((await row(first))!.admitted_at).toBeInstanceOf(Date);

      // Any tenant's own limit, even another's, means a pass must decide.
      await tenant('held', { maxRunning: 1 });
      const second = await ground.newBuild(free.tenantId, free.projectId);
      expect((await store.enqueue(second, true))?.kind).toBe('waiting');
      expect(await row(second)).toMatchObject({ admitted_at: null });
    });

    it('adopts a build that runs already as admitted, a waiting one too, and leaves an admitted or ended one alone', async () => {
      const a = await tenant('adopted');
      const unknown = await ground.newBuild(a.tenantId, a.projectId);
      const [waiting, admitted, ended] = await a.start(3);
      await ground.dataSource.query(
        `UPDATE build_admissions SET admitted_at = now() - interval '1 minute' WHERE build_id = $1`,
        [admitted],
      );
      await store.release(ended!);
      const before = await row(admitted!);

      expect(await store.adopt(unknown)).toBe(true);
      expect(await store.adopt(waiting!)).toBe(true);
      expect(await store.adopt(admitted!)).toBe(false);
      expect(await store.adopt(ended!)).toBe(false);

      expect((await row(unknown))!.admitted_at).toBeInstanceOf(Date);
      expect((await row(waiting!))!.admitted_at).toBeInstanceOf(Date);
      expect(await row(admitted!)).toEqual(before);
      expect(await row(ended!)).toMatchObject({ admitted_at: null });
    });

    it('changes nothing for a build that does not exist', async () => {
      expect(await store.enqueue('00000000-0000-4000-8000-000000000000')).toBeUndefined();
      expect((await ground.snapshot()).waiting).toEqual([]);
    });

    it('leaves with its build when the build is deleted', async () => {
      const [buildId] = await (await tenant('deleted')).start();

      await ground.dataSource.query('DELETE FROM builds WHERE id = $1', [buildId]);

      expect(await row(buildId!)).toBeUndefined();
    });
  });

  describe('admit', () => {
    it('admits every waiting build when nothing limits them, and marks them admitted', async () => {
      const a = await tenant('a');
      // Enough rows that a clock read per row would span several microseconds: one pass, one stamp.
      const builds = await a.start(60);

      const admitted = await store.admit({});

      expect(admitted.map((b) => b.buildId)).toEqual(builds);
      expect(admitted[0]).toMatchObject({ tenantId: a.tenantId, projectId: a.projectId });
      for (const buildId of builds) {
        expect((await row(buildId))!.admitted_at).toEqual(admitted[0]!.admittedAt);
      }
      expect(await store.admit({})).toEqual([]);
    });

    it('fills the installation limit by weighted fair share across tenants', async () => {
      const a = await tenant('a');
      const b = await tenant('b', { weight: 2 });
      const [a1, a2, a3] = await a.start(3);
      const [b1, b2, b3] = await b.start(3);

      // a's shares 0, 1, 2; b's 0, 1/2, 1: b never admitted before either, so ties go to a1.
      expect(await admittedIds({ maxRunning: 5 })).toEqual([a1, b1, b2, a2, b3]);
      expect(await admittedIds({ maxRunning: 5 })).toEqual([]);
      expect(await waiting(a3!, { maxRunning: 5 })).toEqual({
        position: 1,
        reason: 'InstallationLimit',
      });
    });

    it("gives a tie to the tenant admitted least recently, whatever its builds' age", async () => {
      const a = await tenant('a');
      const b = await tenant('b');
      const [a1, a2] = await a.start(2);
      await store.admit({ maxRunning: 1 });
      const [b1] = await b.start();
      await store.release(a1!);

      expect(await admittedIds({ maxRunning: 1 })).toEqual([b1]);
      await store.release(b1!);
      expect(await admittedIds({ maxRunning: 1 })).toEqual([a2]);
    });

    it("keeps a tenant to its own limit, over the tenants' default", async () => {
      const a = await tenant('a', { maxRunning: 2 });
      const b = await tenant('b');
      const [a1, a2] = await a.start(3);
      const [b1] = await b.start(2);

      expect(await admittedIds({ tenantMaxRunning: 1 })).toEqual([a1, b1, a2]);
    });

    it('holds a tenant whose limit is 0', async () => {
      const a = await tenant('paused', { maxRunning: 0 });
      const [a1] = await a.start();

      expect(await admittedIds({})).toEqual([]);
      expect(await waiting(a1!, {})).toEqual({ position: 1, reason: 'TenantLimit' });
    });

    it("skips a build whose project is full and takes the tenant's next one", async () => {
      const a = await tenant('a');
      const other = await ground.newProject(a.tenantId, 'a-api');
      const [web1, web2] = await a.start(2);
      const [api1] = await a.start(1, other);

      expect(await admittedIds({ projectMaxRunning: 1 })).toEqual([web1, api1]);
      expect(await waiting(web2!, { projectMaxRunning: 1 })).toEqual({
        position: 1,
        reason: 'ProjectLimit',
      });
    });

    it('admits nothing while the installation runs more than a lowered limit', async () => {
      const a = await tenant('a');
      await a.start(3);
      await store.admit({});
      const [next] = await a.start();

      expect(await admittedIds({ maxRunning: 2 })).toEqual([]);
      expect(await waiting(next!, { maxRunning: 2 })).toEqual({
        position: 1,
        reason: 'InstallationLimit',
      });
    });

    it('never admits past the limit when several processes admit at once', async () => {
      const tenants = await Promise.all(['a', 'b', 'c'].map((name) => tenant(name)));
      for (const t of tenants) await t.start(5);

      const passes = await Promise.all(
        [...ground.stores, ...ground.stores].map((s) => s.admit({ maxRunning: 4 })),
      );

      expect(passes.flat()).toHaveLength(4);
      expect((await ground.running()).total).toBe(4);
    });
    it('never admits past the limit when a pass runs while another is under way', async () => {
      const a = await tenant('a');
      const b = await tenant('b');
      const [a0, a1] = await a.start(2);
      await store.admit({ maxRunning: 1 });
      await store.release(a0!);
      // A first pass chooses a1, then waits for a1's row, which another transaction holds.
      const holder = ground.dataSource.createQueryRunner();
      await holder.connect();
      await holder.startTransaction();
      await holder.query('SELECT 1 FROM build_admissions WHERE build_id = $1 FOR UPDATE', [a1]);
      const first = ground.stores[1]!.admit({ maxRunning: 1 });
      await untilWaiting(1);
      // b was never admitted: a second pass that did not wait would choose b1 and admit it.
      const [b1] = await b.start();
      let secondDone = false;
      const second = ground.stores[2]!.admit({ maxRunning: 1 }).finally(() => {
        secondDone = true;
      });
      await untilWaiting(2, () => secondDone);
      await holder.commitTransaction();
      await holder.release();

      const passes = await Promise.all([first, second]);

      expect(passes.map((pass) => pass.map((build) => build.buildId))).toEqual([[a1], []]);
      expect(await waiting(b1!, { maxRunning: 1 })).toMatchObject({ position: 1 });
    });
  });

  describe('release', () => {
    it("frees an admitted build's slot for the next waiting build", async () => {
      const [a1, a2] = await (await tenant('a')).start(2);
      await store.admit({ maxRunning: 1 });

      expect(await store.release(a1!)).toBe('running');
      expect(await admittedIds({ maxRunning: 1 })).toEqual([a2]);
    });

    it('stamps an admission after the release that freed its slot, even when the pass waited for the lock meanwhile', async () => {
      const [a1, a2] = await (await tenant('a')).start(2);
      await store.admit({ maxRunning: 1 });
      // Another pass holds the admission lock: this pass's message arrives, then waits for it.
      const holder = ground.dataSource.createQueryRunner();
      await holder.connect();
      await holder.startTransaction();
      await holder.query(`SELECT pg_advisory_xact_lock(hashtext('kiln_admission'))`);
      const pass = ground.stores[1]!.admit({ maxRunning: 1 });
      await untilWaiting(1);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await store.release(a1!)).toBe('running');
      await holder.commitTransaction();
      await holder.release();

      expect((await pass).map((build) => build.buildId)).toEqual([a2]);
      const [released, admitted] = [await row(a1!), await row(a2!)];
      expect(admitted!.admitted_at!.getTime()).toBeGreaterThanOrEqual(
        released!.released_at!.getTime(),
      );
    });

    it('takes a waiting build out of the queue, having freed nothing', async () => {
      const [a1, a2, a3] = await (await tenant('a')).start(3);
      await store.admit({ maxRunning: 1 });

      expect(await store.release(a2!)).toBe('waiting');
      expect(await waiting(a2!, { maxRunning: 1 })).toBeUndefined();
      expect(await admittedIds({ maxRunning: 1 })).toEqual([]);
      await store.release(a1!);
      expect(await admittedIds({ maxRunning: 1 })).toEqual([a3]);
    });

    it('ends nothing the second time, or for a build never enqueued', async () => {
      const [a1] = await (await tenant('a')).start();
      await store.release(a1!);
      const before = await row(a1!);

      expect(await store.release(a1!)).toBe('nothing');
      expect(await row(a1!)).toEqual(before);
      expect(await store.release('00000000-0000-4000-8000-000000000000')).toBe('nothing');
    });
  });

  describe('setClusterReason, refreshReasons, sweep', () => {
    it("tells a change of an admitted build's cluster reason, not a new message for the same one", async () => {
      const [a1, a2] = await (await tenant('a')).start(2);
      await store.admit({ maxRunning: 1 });
      const quota = (pod: string) => ({
        reason: 'ClusterQuota',
        message: `pods "${pod}" is forbidden`,
      });

      expect(await store.setClusterReason(a1!, quota('p1'))).toBe(true);
      expect(await store.setClusterReason(a1!, quota('p2'))).toBe(false);
      expect((await store.states([a1!])).states.get(a1!)).toMatchObject(quota('p2'));
      expect(await store.setClusterReason(a1!, quota('p2'))).toBe(false);
      expect(await store.setClusterReason(a1!, undefined)).toBe(true);
      // A waiting build's reason is admission's own.
      expect(await store.setClusterReason(a2!, quota('p3'))).toBe(false);
    });

    it('writes what each waiting build waits for, answering only the changes, a first reason as the start of a wait', async () => {
      const [a1, a2] = await (await tenant('a')).start(2);
      const [b1] = await (await tenant('b', { maxRunning: 0 })).start();
      await store.admit({ maxRunning: 1 });

      expect(await store.refreshReasons({ maxRunning: 1 })).toEqual([
        {
          buildId: a2,
          before: null,
          place: expect.objectContaining({
            reason: 'InstallationLimit',
            position: 1,
            runningTotal: 1,
            tenantRunning: 1,
          }),
        },
        {
          buildId: b1,
          before: null,
          place: expect.objectContaining({ reason: 'TenantLimit', position: 2, tenantMax: 0 }),
        },
      ]);
      expect(await store.refreshReasons({ maxRunning: 1 })).toEqual([]);
      // A slot frees: a2 is admissible, which is no wait to write (the next pass takes it).
      await store.release(a1!);
      expect(await store.refreshReasons({ maxRunning: 1 })).toEqual([]);
    });

    it('frees the slot of a build that ended without a release, and takes an ended waiting build out of the queue', async () => {
      const [a1, a2, a3] = await (await tenant('a')).start(3);
      await store.admit({ maxRunning: 1 });
      await ground.dataSource.query(
        `UPDATE builds SET status = 'cancelled' WHERE id = ANY($1::uuid[])`,
        [[a1, a2]],
      );

      expect(await store.sweep()).toBe(2);
      expect(await store.sweep()).toBe(0);
      expect(await admittedIds({ maxRunning: 1 })).toEqual([a3]);
    });
  });

  describe('places', () => {
    it('answers each waiting build its place in the order admission takes them', async () => {
      const a = await tenant('a');
      const b = await tenant('b');
      const [a1, a2, a3] = await a.start(3);
      const [b1] = await b.start();
      const limits = { maxRunning: 1 };
      await store.admit(limits);

      expect(await waiting(a1!, limits)).toBeUndefined();
      expect(await waiting(b1!, limits)).toEqual({
        position: 1,
        reason: 'InstallationLimit',
      });
      expect(await waiting(a2!, limits)).toEqual({
        position: 2,
        reason: 'InstallationLimit',
      });
      expect(await waiting(a3!, limits)).toEqual({
        position: 3,
        reason: 'InstallationLimit',
      });
    });

    it('says a build a slot is free for is admissible', async () => {
      const [a1] = await (await tenant('a')).start();

      expect(await waiting(a1!, { maxRunning: 1 })).toEqual({
        position: 1,
        reason: 'Admissible',
      });
    });

    it('answers nothing for a build never enqueued', async () => {
      expect(await waiting('00000000-0000-4000-8000-000000000000', {})).toBeUndefined();
    });
  });

  describe('generation, order', () => {
    /** Runs `change` and answers whether it moved the queue's generation. */
    const moves = async (change: () => Promise<unknown>): Promise<boolean> => {
      const before = await store.generation();
      await change();
      return (await store.generation()) !== before;
    };

    it('moves with every change to what orders the queue, and only with those', async () => {
      const a = await tenant('a');
      const [a1] = await a.start();
      const limits = { maxRunning: 1 };

      expect(await moves(() => a.start())).toBe(true);
      expect(await moves(() => store.admit(limits))).toBe(true);
      // A reason written orders nothing; neither does a pass, a sweep or an enqueue that change nothing.
      expect(await moves(() => store.refreshReasons(limits))).toBe(false);
      expect(
        await moves(() => store.setClusterReason(a1!, { reason: 'ImagePull', message: 'm' })),
      ).toBe(false);
      expect(await moves(() => store.admit(limits))).toBe(false);
      expect(await moves(() => store.sweep())).toBe(false);
      expect(await moves(() => store.enqueue(a1!))).toBe(false);
      expect(await moves(() => store.release(a1!))).toBe(true);
      expect(await moves(() => store.release(a1!))).toBe(false);
      expect(
        await moves(() =>
          ground.dataSource.query(
            `INSERT INTO tenant_admission_settings (tenant_id, weight) VALUES ($1, 3)
             ON CONFLICT (tenant_id) DO UPDATE SET weight = 3`,
            [a.tenantId],
          ),
        ),
      ).toBe(true);
      expect(
        await moves(() => ground.dataSource.query('DELETE FROM builds WHERE id = $1', [a1])),
      ).toBe(true);
      expect(await moves(() => ground.dataSource.query('TRUNCATE build_admissions'))).toBe(true);
    });

    it('answers every waiting build in one order, as `places` places each, with the generation read before it', async () => {
      const a = await tenant('a');
      const b = await tenant('b', { weight: 2 });
      const ids = [...(await a.start(3)), ...(await b.start(2))];
      const limits = { maxRunning: 2 };
      await store.admit(limits);
      const generation = await store.generation();

      const order = await store.order(limits);

      expect(order.generation).toBe(generation);
      expect(order.places).toEqual(await store.places(ids, limits));
      expect([...order.places.values()].map((place) => place.position).sort()).toEqual([1, 2, 3]);
      expect((await store.states(ids)).generation).toBe(generation);
    });
  });

  it('orders and admits exactly as the fair-share rule does, on random queues', async () => {
    // Runs the SQL's closed form against fair-share.ts, the rule taken one slot at a time.
    const limits = fc.record(
      {
        maxRunning: fc.integer({ min: 0, max: 10 }),
        tenantMaxRunning: fc.integer({ min: 0, max: 4 }),
        projectMaxRunning: fc.integer({ min: 0, max: 3 }),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            weight: fc.integer({ min: 1, max: 4 }),
            maxRunning: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
          }),
          { minLength: 2, maxLength: 4 },
        ),
        fc.array(
          fc.record({
            tenant: fc.nat(),
            project: fc.nat({ max: 1 }),
            op: fc.constantFrom('start', 'start', 'start', 'admit', 'release'),
            limits,
          }),
          { minLength: 5, maxLength: 30 },
        ),
        limits,
        async (settings, steps, finalLimits) => {
          await ground.clear();
          const tenants = await Promise.all(settings.map((s, i) => tenant(`t${i}`, s)));
          const projects = await Promise.all(
            tenants.map(async (t) => [t.projectId, await ground.newProject(t.tenantId, 'api')]),
          );
          const started: string[] = [];
          for (const step of steps) {
            const index = step.tenant % tenants.length;
            if (step.op === 'start') {
              started.push(...(await tenants[index]!.start(1, projects[index]![step.project])));
            } else if (step.op === 'admit') {
              await store.admit(step.limits);
            } else if (started.length > 0) {
              await store.release(started[step.tenant % started.length]!);
            }
          }

          const state = await ground.snapshot();
          const expected = queueOrder(state, finalLimits);
          const places = await Promise.all(
            state.waiting.map(
              async (b) => [b.buildId, await waiting(b.buildId, finalLimits)] as const,
            ),
          );
          expect(new Map(places)).toEqual(
            new Map(
              expected.map((p) => [p.build.buildId, { position: p.position, reason: p.reason }]),
            ),
          );
          expect(await admittedIds(finalLimits)).toEqual(
            expected.filter((p) => p.reason === 'Admissible').map((p) => p.build.buildId),
          );
        },
      ),
      { numRuns: 25 },
    );
  });
});
