import { Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import picomatch from 'picomatch';
import { validateManifestAsync } from '../build-methods/manifest.js';
import {
  ConflictError,
  type ErrorDetails,
  InvalidRequestError,
  NotFoundError,
} from '../common/errors.js';
import { carriesCredentials } from '../common/url-credentials.js';
import { KilnConfig } from '../config/config.js';
import { parseSecretReference } from '../manifest/secret-reference.js';
import { ProjectsRepository } from '../projects/projects.repository.js';
import { SecretSealer } from '../secrets/secret-sealer.js';
import type { CreateTriggerDto, UpdateTriggerDto } from './dto/trigger.dto.js';
import {
  type DeliveryRecord,
  type StatusTargetRecord,
  type TriggerBuild,
  type TriggerEvent,
  type TriggerFields,
  type TriggerRecord,
  TriggersRepository,
} from './triggers.repository.js';
import type {
  DeliveryResponse,
  TriggerResponse,
  TriggerWithSecretResponse,
} from './dto/trigger.dto.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._ -]{0,99}$/;
const DEFAULT_CONTEXT = 'kiln';

/** The triggers of a tenant's projects: made, changed, listed, their secrets rotated. */
@Injectable()
export class TriggersService {
  constructor(
    private readonly triggers: TriggersRepository,
    private readonly projects: ProjectsRepository,
    private readonly sealer: SecretSealer,
    private readonly config: KilnConfig,
  ) {}

  async create(
    tenantId: string,
    userId: string,
    projectId: string,
    body: CreateTriggerDto,
  ): Promise<TriggerWithSecretResponse> {
    const project = await this.projects.findInTenant(tenantId, projectId);
    if (project === undefined) throw new NotFoundError('Project not found');
    const secret = newSecret();
    const fields = await this.checked(
      {
        name: body.name,
        provider: body.provider,
        events: (body.events ?? ['push']) as TriggerEvent[],
        branches: body.branches ?? ['**'],
        tags: body.tags ?? ['**'],
        paths: body.paths ?? [],
        build: buildOf(body.build),
        start: body.start ?? true,
        concurrency: body.concurrency ?? 'parallel',
        secretSealed: this.sealer.seal(secret),
        pollIntervalSeconds: body.poll_interval_seconds ?? null,
        statusTarget: statusOf(body.status),
        enabled: body.enabled ?? true,
      },
      project.gitRepositoryUrl,
    );
    const created = await this.unique(() =>
      this.triggers.create(tenantId, projectId, userId, fields),
    );
    return { ...this.toResponse(created), secret };
  }

  async list(tenantId: string, projectId: string): Promise<TriggerResponse[]> {
    if ((await this.projects.findInTenant(tenantId, projectId)) === undefined) {
      throw new NotFoundError('Project not found');
    }
    return (await this.triggers.list(tenantId, projectId)).map((t) => this.toResponse(t));
  }

  async get(tenantId: string, id: string): Promise<TriggerResponse> {
    return this.toResponse(await this.triggers.find(tenantId, id));
  }

  async update(tenantId: string, id: string, body: UpdateTriggerDto): Promise<TriggerResponse> {
    const current = await this.triggers.find(tenantId, id);
    const project = await this.projects.findInTenant(tenantId, current.projectId);
    const fields = await this.checked(
      {
        name: body.name ?? current.name,
        provider: body.provider ?? current.provider,
        events: (body.events as TriggerEvent[] | undefined) ?? current.events,
        branches: body.branches ?? current.branches,
        tags: body.tags ?? current.tags,
        paths: body.paths ?? current.paths,
        build: body.build === undefined ? current.build : buildOf(body.build),
        start: body.start ?? current.start,
        concurrency: body.concurrency ?? current.concurrency,
        secretSealed: current.secretSealed,
        pollIntervalSeconds:
          body.poll_interval_seconds === undefined
            ? current.pollIntervalSeconds
            : body.poll_interval_seconds,
        statusTarget: body.status === undefined ? current.statusTarget : statusOf(body.status),
        enabled: body.enabled ?? current.enabled,
      },
      project?.gitRepositoryUrl ?? null,
    );
    return this.toResponse(await this.unique(() => this.triggers.update(tenantId, id, fields)));
  }

  /** A new webhook secret, shown once; the old one stops working at once. */
  async rotateSecret(tenantId: string, id: string): Promise<TriggerWithSecretResponse> {
    const current = await this.triggers.find(tenantId, id);
    const secret = newSecret();
    const updated = await this.triggers.update(tenantId, id, {
      ...current,
      secretSealed: this.sealer.seal(secret),
    });
    return { ...this.toResponse(updated), secret };
  }

  remove(tenantId: string, id: string): Promise<void> {
    return this.triggers.remove(tenantId, id);
  }

  async deliveries(tenantId: string, id: string): Promise<DeliveryResponse[]> {
    return (await this.triggers.deliveries(tenantId, id)).map(toDeliveryResponse);
  }

  toResponse(trigger: TriggerRecord): TriggerResponse {
    return {
      id: trigger.id,
      project_id: trigger.projectId,
      name: trigger.name,
      provider: trigger.provider,
      events: [...trigger.events],
      branches: [...trigger.branches],
      tags: [...trigger.tags],
      paths: [...trigger.paths],
      build: { ...trigger.build },
      start: trigger.start,
      concurrency: trigger.concurrency,
      poll_interval_seconds: trigger.pollIntervalSeconds,
      poll_error: trigger.pollError,
      status: trigger.statusTarget === null ? null : { ...trigger.statusTarget },
      enabled: trigger.enabled,
      webhook_url: `${this.config.triggers.publicUrl}/api/v1/hooks/${trigger.id}`,
      created_at: trigger.createdAt.toISOString(),
      updated_at: trigger.updatedAt.toISOString(),
    };
  }

  /** Every rule the DTO cannot state, checked together: one 400 lists all that is wrong. */
  private async checked(
    fields: TriggerFields,
    repositoryUrl: string | null,
  ): Promise<TriggerFields> {
    const problems: ErrorDetails = {};
    if (!NAME.test(fields.name)) {
      problems.name = 'must be 1 to 100 letters, digits, spaces, dots, dashes or underscores';
    }
    if (fields.events.length === 0) problems.events = 'must name at least one event';
    for (const [field, patterns] of [
      ['branches', fields.branches],
      ['tags', fields.tags],
      ['paths', fields.paths],
    ] as const) {
      const bad = patterns.find((pattern) => globProblem(pattern) !== undefined);
      if (bad !== undefined) problems[field] = `${JSON.stringify(bad)}: ${globProblem(bad)}`;
    }
    if (!fields.start && fields.concurrency !== 'parallel') {
      problems.concurrency = `${fields.concurrency} needs start: true (kiln starts the builds it orders)`;
    }
    if (fields.pollIntervalSeconds !== null && repositoryUrl === null) {
      problems.poll_interval_seconds = 'the project has no git repository URL to poll';
    }
    if (fields.events.includes('pull_request') && fields.pollIntervalSeconds !== null) {
      // Polling sees branches and tags only; said here so nobody waits for pull request builds.
      problems.events =
        'pull_request events come from webhooks only; polling sees branches and tags';
    }
    if (fields.statusTarget !== null) Object.assign(problems, statusProblems(fields.statusTarget));
    Object.assign(problems, await buildProblems(fields.build));
    if (Object.keys(problems).length > 0) {
      throw InvalidRequestError.listing('Invalid trigger', problems);
    }
    return fields;
  }

  private async unique<T>(write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (error) {
      if ((error as { code?: string }).code === '23505') {
        throw new ConflictError('The project has a trigger of that name');
      }
      throw error;
    }
  }
}

/**
 * 32 random bytes in the form GitLab requires of a signing token (`whsec_` and base64), which
 * GitHub, Gitea, Forgejo and GitLab's secret token take as any other text: one secret fits every
 * field it is pasted into.
 */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function buildOf(body: CreateTriggerDto['build']): TriggerBuild {
  if (body === undefined || body.form === 'reference') {
    return { form: 'reference', build_args: body?.build_args ?? null };
  }
  return { form: 'manifest', manifest: body.manifest ?? {} };
}

function statusOf(body: CreateTriggerDto['status']): StatusTargetRecord | null {
  if (body === undefined || body === null) return null;
  return {
    api_url: body.api_url.replace(/\/+$/, ''),
    repository: body.repository,
    token: body.token,
    context: body.context ?? DEFAULT_CONTEXT,
  };
}

function globProblem(pattern: string): string | undefined {
  if (pattern.trim() === '') return 'must not be empty';
  try {
    picomatch.makeRe(pattern, { dot: true, strictBrackets: true });
    return undefined;
  } catch (error) {
    return `is not a glob pattern (${(error as Error).message})`;
  }
}

function statusProblems(target: StatusTargetRecord): ErrorDetails {
  const problems: ErrorDetails = {};
  let url: URL | undefined;
  try {
    url = new URL(target.api_url);
  } catch {
    problems['status.api_url'] = 'must be an http(s) URL';
  }
  if (url !== undefined && url.protocol !== 'https:' && url.protocol !== 'http:') {
    problems['status.api_url'] = 'must be an http(s) URL';
  } else if (url !== undefined && carriesCredentials(target.api_url)) {
    problems['status.api_url'] = 'must not carry credentials: the token is a secret reference';
  }
  if (target.repository.trim() === '') problems['status.repository'] = 'must not be empty';
  const token = parseSecretReference(target.token);
  if ('problem' in token) {
    problems['status.token'] =
      `must be a secret reference (vault:…, aws:…, azure:…): ${token.problem}`;
  }
  if (target.context.trim() === '') problems['status.context'] = 'must not be empty';
  return problems;
}

async function buildProblems(build: TriggerBuild): Promise<ErrorDetails> {
  if (build.form === 'reference') {
    const args = build.build_args ?? {};
    const bad = Object.entries(args).find(([, value]) => typeof value !== 'string');
    return bad === undefined ? {} : { 'build.build_args': `${bad[0]}: must be a string` };
  }
  const result = await validateManifestAsync(build.manifest);
  if (result.ok) return {};
  return Object.fromEntries(
    // The manifest's own field names start with `manifest` already (manifest.tags).
    Object.entries(result.details).map(([field, problem]) => [
      `build.${field.startsWith('manifest') ? field : `manifest.${field}`}`,
      problem,
    ]),
  );
}

export function toDeliveryResponse(delivery: DeliveryRecord): DeliveryResponse {
  return {
    id: delivery.id,
    delivery_id: delivery.deliveryId,
    event: delivery.event,
    ref: delivery.ref,
    commit: delivery.commit,
    pusher: delivery.pusher,
    outcome: delivery.outcome,
    detail: delivery.detail,
    build_id: delivery.buildId,
    received_at: delivery.receivedAt.toISOString(),
  };
}
