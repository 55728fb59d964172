import fc from 'fast-check';
import {
  type AdmissionLimits,
  type AdmissionSnapshot,
  nextAdmissions,
  type QueuedBuild,
  queueOrder,
  type TenantShare,
} from './fair-share.js';

let seq = 0;
const queued = (tenantId: string, projectId = `${tenantId}-p`): QueuedBuild => ({
  buildId: `${tenantId}${++seq}`,
  tenantId,
  projectId,
  seq,
});
const running = (tenantId: string, projectId = `${tenantId}-p`) => ({ tenantId, projectId });
const snapshot = (
  waiting: QueuedBuild[],
  runs: Array<{ tenantId: string; projectId: string }> = [],
  tenants: Record<string, Partial<TenantShare>> = {},
): AdmissionSnapshot => ({
  waiting,
  running: runs,
  tenants: new Map(
    Object.entries(tenants).map(([id, share]) => [
      id,
      { weight: 1, maxRunning: null, lastAdmitted: null, ...share },
    ]),
  ),
});
const ids = (builds: QueuedBuild[]) => builds.map((build) => build.buildId);

describe(queueOrder.name, () => {
  beforeEach(() => {
    seq = 0;
  });

  it('gives the next slot to the tenant with the least running builds per weight', () => {
    const waiting = [queued('a'), queued('b'), queued('c')];
    const state = snapshot(
      waiting,
      [running('a'), running('a'), running('b'), running('b'), running('c')],
      { b: { weight: 4 } },
    );

    // shares: a 2/1, b 2/4, c 1/1
    expect(ids(nextAdmissions(state, {}))).toEqual(['b2', 'c3', 'a1']);
  });

  it("takes a tenant's builds first started first", () => {
    const waiting = [queued('a'), queued('a'), queued('a')];

    expect(ids(nextAdmissions(snapshot([...waiting].reverse()), {}))).toEqual(['a1', 'a2', 'a3']);
  });

  it('interleaves tenants by their weights, not by when their builds started', () => {
    const waiting = [...Array.from({ length: 6 }, () => queued('a')), queued('b'), queued('b')];
    const state = snapshot(waiting, [], { a: { weight: 2 } });

    // a's shares 0, 1/2, 1, 3/2, …; b's 0, 1; neither admitted before: ties to the older build.
    expect(ids(nextAdmissions(state, {}))).toEqual([
      'a1',
      'b7',
      'a2',
      'a3',
      'b8',
      'a4',
      'a5',
      'a6',
    ]);
  });

  it('breaks a tie for the tenant admitted least recently, a never-admitted one first', () => {
    const waiting = [queued('a'), queued('b'), queued('c')];
    const state = snapshot(waiting, [], { a: { lastAdmitted: 20 }, b: { lastAdmitted: 10 } });

    expect(ids(nextAdmissions(state, { maxRunning: 3 }))).toEqual(['c3', 'b2', 'a1']);
  });

  it('breaks a tie between tenants never admitted for the build that started waiting first', () => {
    const waiting = [queued('b'), queued('a')];

    expect(ids(nextAdmissions(snapshot(waiting), {}))).toEqual(['b1', 'a2']);
  });

  it('stops at the installation limit and says the rest wait for it', () => {
    const state = snapshot([queued('a'), queued('b'), queued('a')], [running('c')]);

    expect(queueOrder(state, { maxRunning: 2 }).map((p) => [p.build.buildId, p.reason])).toEqual([
      ['a1', 'Admissible'],
      ['b2', 'InstallationLimit'],
      ['a3', 'InstallationLimit'],
    ]);
  });

  it("skips a build whose project is full and takes the tenant's next one", () => {
    const state = snapshot([queued('a', 'full'), queued('a', 'free')], [running('a', 'full')]);

    expect(
      queueOrder(state, { projectMaxRunning: 1 }).map((p) => [p.build.buildId, p.reason]),
    ).toEqual([
      ['a2', 'Admissible'],
      ['a1', 'ProjectLimit'],
    ]);
  });

  it("holds a tenant at its own limit, which overrides the tenants' default", () => {
    const waiting = [queued('a'), queued('a'), queued('b'), queued('b')];
    const state = snapshot(waiting, [], { b: { maxRunning: 0 } });
    const limits: AdmissionLimits = { tenantMaxRunning: 1 };

    expect(queueOrder(state, limits).map((p) => [p.build.buildId, p.position, p.reason])).toEqual([
      ['a1', 1, 'Admissible'],
      ['b3', 2, 'TenantLimit'],
      ['a2', 3, 'TenantLimit'],
      ['b4', 4, 'TenantLimit'],
    ]);
  });

  it('gives a tenant that arrives behind 20 builds of another the next freed slot, at limit 1', () => {
    // With ties to the oldest waiting build, a's 20 builds would all run before b's first.
    let state = snapshot(
      Array.from({ length: 20 }, () => queued('a')),
      [],
      {},
    );
    state = admitNext(state, { maxRunning: 1 }, 1);
    state = { ...state, waiting: [...state.waiting, queued('b'), queued('b')] };
    const taken: string[] = [];
    for (let clock = 2; clock < 6; clock++) {
      state = { ...state, running: [] };
      const [next] = nextAdmissions(state, { maxRunning: 1 });
      taken.push(next!.buildId);
      state = admitNext(state, { maxRunning: 1 }, clock);
    }

    expect(taken).toEqual(['b21', 'a2', 'b22', 'a3']);
  });

  describe('as a property', () => {
    const tenants = ['t0', 't1', 't2', 't3', 't4'];
    const arbitraryState = fc
      .record({
        waiting: fc.array(
          fc.record({
            tenant: fc.integer({ min: 0, max: 4 }),
            project: fc.integer({ min: 0, max: 2 }),
          }),
          { maxLength: 30 },
        ),
        running: fc.array(
          fc.record({
            tenant: fc.integer({ min: 0, max: 4 }),
            project: fc.integer({ min: 0, max: 2 }),
          }),
          { maxLength: 10 },
        ),
        shares: fc.array(
          fc.record({
            weight: fc.integer({ min: 1, max: 5 }),
            maxRunning: fc.option(fc.integer({ min: 0, max: 4 })),
            lastAdmitted: fc.option(fc.integer({ min: 0, max: 3 })),
          }),
          { minLength: 5, maxLength: 5 },
        ),
        limits: fc.record(
          {
            maxRunning: fc.integer({ min: 0, max: 12 }),
            tenantMaxRunning: fc.integer({ min: 0, max: 5 }),
            projectMaxRunning: fc.integer({ min: 0, max: 4 }),
          },
          { requiredKeys: [] },
        ),
      })
      .map(({ waiting, running: runs, shares, limits }) => ({
        state: {
          waiting: waiting.map(({ tenant, project }, index) => ({
            buildId: `w${index}`,
            tenantId: tenants[tenant]!,
            projectId: `${tenants[tenant]}-p${project}`,
            seq: index,
          })),
          running: runs.map(({ tenant, project }) => ({
            tenantId: tenants[tenant]!,
            projectId: `${tenants[tenant]}-p${project}`,
          })),
          tenants: new Map(shares.map((share, index) => [tenants[index]!, share])),
        } satisfies AdmissionSnapshot,
        limits,
      }));

    it('places every waiting build once and admits none past a limit', () => {
      fc.assert(
        fc.property(arbitraryState, ({ state, limits }) => {
          const order = queueOrder(state, limits);
          const admitted = nextAdmissions(state, limits);
          const after = [...state.running, ...admitted];
          const count = (key: (b: { tenantId: string; projectId: string }) => string, k: string) =>
            after.filter((b) => key(b) === k).length;

          expect(order.map((p) => p.position)).toEqual(order.map((_, i) => i + 1));
          expect(order.map((p) => p.build.buildId).sort()).toEqual(
            state.waiting.map((b) => b.buildId).sort(),
          );
          expect(admitted.length).toBeLessThanOrEqual(
            Math.max(0, (limits.maxRunning ?? Infinity) - state.running.length),
          );
          for (const build of admitted) {
            const tenantLimit =
              state.tenants.get(build.tenantId)!.maxRunning ?? limits.tenantMaxRunning ?? Infinity;
            expect(count((b) => b.tenantId, build.tenantId)).toBeLessThanOrEqual(tenantLimit);
            expect(count((b) => b.projectId, build.projectId)).toBeLessThanOrEqual(
              limits.projectMaxRunning ?? Infinity,
            );
          }
        }),
        { numRuns: 300 },
      );
    });

    it("never takes a tenant's build before an earlier one of the same project", () => {
      fc.assert(
        fc.property(arbitraryState, ({ state, limits }) => {
          const order = queueOrder(state, limits).map((p) => p.build);
          for (const [index, build] of order.entries()) {
            const later = order
              .slice(0, index)
              .filter((b) => b.projectId === build.projectId && b.seq > build.seq);
            expect(later).toEqual([]);
          }
        }),
        { numRuns: 300 },
      );
    });

    it('admits a tenant with no running build within the next `tenants waiting` freed slots', () => {
      // One slot frees at a time (a random running build ends) and one pass runs: a tenant that
      // runs nothing and waits is served within as many passes as there are waiting tenants.
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 3 }),
          fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 5, maxLength: 5 }),
          fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 10, maxLength: 40 }),
          fc.array(fc.nat(), { minLength: 60, maxLength: 60 }),
          (limit, weights, arrivals, ends) => {
            const limits = { maxRunning: limit };
            let state: AdmissionSnapshot = snapshot(
              arrivals.map((t) => queued(tenants[t]!)),
              [],
              Object.fromEntries(tenants.map((t, i) => [t, { weight: weights[i]! }])),
            );
            // For each tenant that waits and runs nothing: since which pass, and how many
            // tenants waited then.
            const idle = new Map<string, { since: number; waitingTenants: number }>();
            for (const [pass, end] of ends.entries()) {
              if (state.running.length > 0) {
                const ended = end % state.running.length;
                state = { ...state, running: state.running.filter((_, i) => i !== ended) };
              }
              const waitingTenants = new Set(state.waiting.map((b) => b.tenantId));
              for (const tenant of waitingTenants) {
                if (state.running.some((b) => b.tenantId === tenant)) idle.delete(tenant);
                else if (!idle.has(tenant))
                  idle.set(tenant, { since: pass, waitingTenants: waitingTenants.size });
              }
              for (const [tenant, { since, waitingTenants: bound }] of idle) {
                if (!waitingTenants.has(tenant)) idle.delete(tenant);
                else expect(pass - since).toBeLessThan(bound);
              }
              state = admitNext(state, limits, pass);
              for (const build of state.running) idle.delete(build.tenantId);
            }
          },
        ),
        { numRuns: 200 },
      );
    });
  });
});

/** Applies one admission pass to the snapshot at `clock`. */
function admitNext(state: AdmissionSnapshot, limits: AdmissionLimits, clock: number) {
  const taken = nextAdmissions(state, limits);
  const tenants = new Map(state.tenants);
  for (const build of taken) {
    tenants.set(build.tenantId, {
      weight: 1,
      maxRunning: null,
      ...tenants.get(build.tenantId),
      lastAdmitted: clock,
    });
  }
  return {
    waiting: state.waiting.filter((b) => !taken.includes(b)),
    running: [...state.running, ...taken],
    tenants,
  };
}
