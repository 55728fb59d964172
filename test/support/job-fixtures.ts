import type { BuildSpec, SpecContext } from '../../src/manifest/build-spec.js';
import { DEFAULT_JOB_SETTINGS, type JobContext } from '../../src/build-methods/job.js';

/**
 * The build every method's jobSpec table test renders for: one project, one build id, the Job
 * context the operator would pass, and the labels it expects on every object.
 */
export const REPOSITORY = 'https://git.example.com/web.git';
export const BUILD_ID = '3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b';
const TENANT_ID = '11111111-2222-4333-8444-555555555555';
const PROJECT_ID = '66666666-7777-4888-9999-aaaaaaaaaaaa';

export const specContext: SpecContext = {
  project: { name: 'My Web', gitRepositoryUrl: REPOSITORY, defaultRegistry: null },
  defaultRegistry: '127.0.0.1:5000/kiln',
  timeoutSeconds: 900,
};
export const withoutRepository: SpecContext = {
  ...specContext,
  project: { ...specContext.project, gitRepositoryUrl: null },
};
export const withoutRegistry: SpecContext = { ...specContext, defaultRegistry: undefined };

export const jobContext: JobContext = {
  buildId: BUILD_ID,
  tenantId: TENANT_ID,
  projectId: PROJECT_ID,
  buildNumber: 7,
  namespace: 'kiln-builds',
  settings: DEFAULT_JOB_SETTINGS,
  configMapName: `kiln-${BUILD_ID}`,
  buildSecretName: `kiln-${BUILD_ID}`,
};

export const LABELS = {
  'app.kubernetes.io/managed-by': 'kiln',
  'app.kubernetes.io/name': 'kiln-build',
  'kiln.dev/build-id': BUILD_ID,
  'kiln.dev/tenant-id': TENANT_ID,
  'kiln.dev/project-id': PROJECT_ID,
};

/** The note every build naming SBOM and scan tools gets while the operator has no step image. */
export const stepsOffNotes = (spec: BuildSpec): string[] =>
  spec.sbomTool === null && spec.scanTool === null
    ? []
    : [
        `the SBOM (${spec.sbomTool}) and scan (${spec.scanTool}) steps are off: the operator has no KILN_STEP_IMAGE`,
      ];
