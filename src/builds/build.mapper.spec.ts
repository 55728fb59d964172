import { referenceSpec } from '../../test/support/build-specs.js';
import { BuildEntity } from '../lifecycle/build.entity.js';
import { toBuildResponse } from './build.mapper.js';

const DIGEST = `sha256:${'0f'.repeat(32)}`;
const TRIGGER_ID = '3d2c1b0a-9f8e-4d7c-8b6a-5f4e3d2c1b0a';

/** A build as the repository reads it back, ended at `completed`. */
function stored(changes: Partial<BuildEntity> = {}): BuildEntity {
  return Object.assign(new BuildEntity(), {
    id: '5a4c1f4e-9f55-4a8e-8f6f-3f3b9b3c2d11',
    tenantId: '0b8f1c9e-1c2d-4e5f-8a9b-0c1d2e3f4a5b',
    projectId: '7c6d5e4f-3a2b-4c1d-9e8f-7a6b5c4d3e2f',
    buildNumber: 7,
    status: 'success',
    gitBranch: 'main',
    gitCommit: 'a'.repeat(40),
    gitAuthorName: 'Ada',
    gitAuthorEmail: 'ada@example.com',
    method: null,
    config: { form: 'reference', build_args: null },
    spec: referenceSpec(),
    errorMessage: null,
    failureReason: null,
    cancelReason: null,
    retryOf: null,
    progressCurrent: null,
    progressTotal: null,
    runnerRef: null,
    idempotencyKey: null,
    requestHash: null,
    createdBy: null,
    imageDigest: null,
    images: [],
    keep: false,
    triggerId: null,
    triggerEvent: null,
    triggeredBy: null,
    startedAt: new Date('2025-03-01T10:00:00Z'),
    completedAt: new Date('2025-03-01T10:04:00Z'),
    createdAt: new Date('2025-03-01T09:59:00Z'),
    updatedAt: new Date('2025-03-01T10:04:00Z'),
    ...changes,
  });
}

describe(toBuildResponse.name, () => {
  it('shows the digest and each reference a build pushed', () => {
    const images = [
      `registry.example.com/team/app:latest@${DIGEST}`,
      `registry.example.com/team/app:v1@${DIGEST}`,
    ];

    const response = toBuildResponse(stored({ imageDigest: DIGEST, images }));

    expect(response).toMatchObject({ image_digest: DIGEST, images });
  });

  it('shows a null digest and no references for a build that pushed nothing kiln knows of', () => {
    const response = toBuildResponse(stored());

    expect(response).toMatchObject({ image_digest: null, images: [] });
  });

  it('names the trigger, event and pusher of a build a trigger made, and null for one a caller made', () => {
    expect(toBuildResponse(stored()).trigger).toBeNull();
    expect(
      toBuildResponse(stored({ triggerId: TRIGGER_ID, triggerEvent: 'tag', triggeredBy: 'ada' }))
        .trigger,
    ).toEqual({ id: TRIGGER_ID, event: 'tag', pusher: 'ada' });
  });

  it('shows whether the build is pinned against retention', () => {
    expect(toBuildResponse(stored({ keep: true })).keep).toBe(true);
    expect(toBuildResponse(stored()).keep).toBe(false);
  });

  it("keeps the spec's fields in the spec's order, the pushed image, the failure reason, keep and the trigger after them", () => {
    const response = toBuildResponse(stored({ imageDigest: DIGEST }));

    expect(Object.keys(response)).toEqual([
      'id',
      'project_id',
      'build_number',
      'git_branch',
      'git_commit',
      'git_author_name',
      'git_author_email',
      'status',
      'error_message',
      'started_at',
      'completed_at',
      'created_at',
      'updated_at',
      'image_digest',
      'images',
      'failure_reason',
      'keep',
      'trigger',
      'provenance',
    ]);
  });
});
