import type { TestApp } from './test-app.js';

/** Calls the API as a member of a tenant. */
export class ApiClient {
  constructor(
    private readonly kiln: TestApp,
    private readonly token: string,
    readonly tenantId: string,
  ) {}

  request(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    return fetch(`${this.kiln.baseUrl}/api/v1${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.token}`,
        'x-tenant-id': this.tenantId,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  }

  /** POST /builds (reference form) and return the created build, failing loudly otherwise. */
  async createBuild(
    projectId: string,
    branch = 'main',
    extra: Record<string, unknown> = {},
  ): Promise<Record<string, any>> {
    const response = await this.request('POST', '/builds', {
      project_id: projectId,
      git_branch: branch,
      ...extra,
    });
    if (response.status !== 201)
      throw new Error(`create gave ${response.status}: ${await response.text()}`);
    return (await response.json()) as Record<string, any>;
  }
}

/** A manifest as the wizard sends it for each method. */
export function wizardManifest(
  type: 'kaniko' | 'buildx' | 'container' | 'paketo' | 'packer',
): Record<string, unknown> {
  const buildConfig: Record<string, unknown> = {
    build_type: type,
    sbom_tool: 'syft',
    scan_tool: 'trivy',
    registry_type: 'harbor',
    secret_manager_type: 'vault',
    build_context: '.',
  };
  const manifest: Record<string, unknown> = {
    name: `${type} build`,
    description: 'from the wizard',
    type,
    base_image: '',
    instructions: [],
    environment: { CI: 'true', EMPTY: '' },
    tags: 'latest, v1 ,',
    metadata: { source: 'wizard' },
    build_config: buildConfig,
  };
  switch (type) {
    case 'kaniko':
      buildConfig['dockerfile'] = 'FROM scratch\nCOPY . /\n';
      buildConfig['registry_repository'] = 'registry.example.com/team/app';
      break;
    case 'buildx':
      buildConfig['dockerfile'] = 'FROM scratch\nCOPY . /\n';
      buildConfig['platforms'] = ['linux/amd64', 'linux/arm64'];
      break;
    case 'container':
      manifest['base_image'] = 'docker.io/library/alpine:3.20';
      manifest['instructions'] = ['RUN echo hi', 'CMD ["sh"]'];
      break;
    case 'paketo':
      buildConfig['paketo_config'] = { builder: 'paketobuildpacks/builder:base', buildpacks: [] };
      break;
    case 'packer':
      buildConfig['packer_template'] = JSON.stringify({
        builders: [{ type: 'docker', image: 'scratch' }],
      });
      break;
  }
  return manifest;
}

let distinctBuilds = 0;

/**
 * `manifest` with a tag no other build of this test process has, so it is nobody's duplicate
 * (docs/adr/0030-duplicate-builds.md): for tests that create "another build" of one method.
 */
export function distinct(manifest: Record<string, unknown>): Record<string, unknown> {
  distinctBuilds += 1;
  const tags = manifest['tags'];
  const tag = `only-${process.env['JEST_WORKER_ID'] ?? '0'}-${distinctBuilds}`;
  return {
    ...manifest,
    tags: Array.isArray(tags)
      ? [...(tags as string[]), tag]
      : `${typeof tags === 'string' ? tags : ''}, ${tag}`,
  };
}
