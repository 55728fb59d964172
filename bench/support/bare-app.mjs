// The baseline of bench/api.bench.mjs, run as its own process: the smallest real NestJS app
// (@nestjs/core + @nestjs/platform-express, as kiln) that serves kiln's three hot build routes
// from the same database. Plain JavaScript, so decorators are applied by calling them. Per
// request: the same bearer-token check as kiln (jsonwebtoken, HS256, the key built once, kiln's
// tokenVerifyOptions), then the SQL the route needs: GET by id one SELECT; list what kiln's list
// runs (the page, and a capped count and the planner's estimate when the page does not settle
// the total); create one transaction (UPDATE projects … RETURNING, INSERT INTO builds). No rate
// limit, membership check, validation pipe, ORM or error mapping: what kiln adds on top of it is
// what the bench measures.
//
// It reads kiln's own configuration from the same environment (loadConfig), so the secret,
// issuer, audience, build timeout and registry are kiln's; it listens on KILN_HOST:PORT.
import 'reflect-metadata';
import { createSecretKey } from 'node:crypto';
import {
  Body,
  ConflictException,
  Controller,
  Get,
  Headers,
  Inject,
  Module,
  NotFoundException,
  Param,
  Post,
  Query,
  Req,
  UnauthorizedException,
  UseGuards,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import jwt from 'jsonwebtoken';
import pg from 'pg';
import { tokenVerifyOptions } from '../../dist/auth/authorizer.js';
import { specOfReference } from '../../dist/manifest/build-spec.js';
import { loadConfig } from '../../dist/config/config.js';

const POOL = Symbol('POOL');
const JWT_KEY = Symbol('JWT_KEY');
const CONFIG = Symbol('CONFIG');

/** The columns of kiln's Build response (build.mapper.ts toBuildResponse), under its names. */
const BUILD_COLUMNS = `id, project_id, build_number, git_branch, git_commit, git_author_name,
  git_author_email, status, error_message, started_at, completed_at, created_at, updated_at,
  image_digest, images, failure_reason`;
const GET_BUILD = `SELECT ${BUILD_COLUMNS} FROM builds WHERE id = $1 AND tenant_id = $2`;
/** kiln's default list order: created_at descending, ties broken by id. */
const LIST_PAGE = `SELECT ${BUILD_COLUMNS} FROM builds WHERE tenant_id = $1
  ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`;
const LIST_COUNT_UP_TO = `SELECT count(*)::int AS n
  FROM (SELECT 1 FROM builds WHERE tenant_id = $1 LIMIT $2) AS capped`;
const LIST_ESTIMATE = `EXPLAIN (FORMAT JSON) SELECT 1 FROM builds WHERE tenant_id = $1`;
/** kiln's number allocation (BuildsRepository.allocateNumber), also returning what the spec needs. */
const ALLOCATE_NUMBER = `UPDATE projects SET next_build_number = next_build_number + 1, updated_at = now()
  WHERE id = $1 AND tenant_id = $2
  RETURNING next_build_number - 1 AS number, name, git_repository_url, default_registry`;
const INSERT_BUILD = `INSERT INTO builds (tenant_id, project_id, build_number, status, git_branch,
    git_commit, method, config, spec, created_by, images)
  VALUES ($1, $2, $3, 'queued', $4, $5, NULL, $6, $7, $8, '[]')
  RETURNING id, project_id, build_number, git_branch, status, created_at, updated_at`;

/** Checks `Authorization: Bearer <token>` as kiln does and notes the token's user. */
class BearerGuard {
  constructor(key, config) {
    this.key = key;
    this.options = tokenVerifyOptions(config);
  }

  canActivate(context) {
    const request = context.switchToHttp().getRequest();
    const match = /^bearer +(\S+)$/i.exec(request.headers.authorization ?? '');
    if (match === null) throw new UnauthorizedException();
    let verified;
    try {
      verified = jwt.verify(match[1], this.key, this.options);
    } catch {
      throw new UnauthorizedException();
    }
    if (typeof verified.payload.sub !== 'string') throw new UnauthorizedException();
    request.userId = verified.payload.sub;
    return true;
  }
}
Inject(JWT_KEY)(BearerGuard, undefined, 0);
Inject(CONFIG)(BearerGuard, undefined, 1);

class BuildsController {
  constructor(pool, config) {
    this.pool = pool;
    this.config = config;
  }

  async get(id, tenantId) {
    const { rows } = await this.pool.query(GET_BUILD, [id, tenantId]);
    if (rows.length === 0) throw new NotFoundException();
    return rows[0];
  }

  /**
   * kiln's list (BuildsRepository.list): the page read with one row past it, so has_more is
   * exact; the total from the page when it reaches the end, else counted up to
   * KILN_LIST_EXACT_COUNT_LIMIT + 1 rows and, past that, the planner's estimate.
   */
  async list(tenantId, query) {
    const page = Number(query.page ?? 1);
    const limit = Number(query.limit ?? 20);
    const offset = (page - 1) * limit;
    const { rows } = await this.pool.query(LIST_PAGE, [tenantId, limit + 1, offset]);
    const hasMore = rows.length > limit;
    const builds = rows.slice(0, limit);
    const total = await this.total(tenantId, offset, builds.length, hasMore);
    return { builds, total_count: total, page, limit, has_more: hasMore };
  }

  async total(tenantId, offset, shown, hasMore) {
    const seen = offset + shown;
    if (!hasMore && (shown > 0 || offset === 0)) return seen;
    const cap = this.config.listExactCountLimit;
    const { rows } = await this.pool.query(LIST_COUNT_UP_TO, [tenantId, cap + 1]);
    let total = rows[0].n;
    if (total > cap) {
      const { rows: plan } = await this.pool.query(LIST_ESTIMATE, [tenantId]);
      total = Math.max(total, Math.round(plan[0]['QUERY PLAN'][0].Plan['Plan Rows']));
    }
    return hasMore ? Math.max(total, seen + 1) : Math.min(total, offset);
  }

  async create(tenantId, request, body) {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query(ALLOCATE_NUMBER, [body.project_id, tenantId]);
      if (rows.length === 0) throw new NotFoundException();
      const project = rows[0];
      const commit = body.git_commit?.toLowerCase() ?? null;
      const spec = specOfReference(
        { branch: body.git_branch, commit, buildArgs: body.build_args ?? null },
        {
          project: {
            name: project.name,
            gitRepositoryUrl: project.git_repository_url,
            defaultRegistry: project.default_registry,
          },
          defaultRegistry: this.config.localRegistry,
          timeoutSeconds: this.config.buildTimeoutSeconds,
        },
      );
      const { rows: created } = await client.query(INSERT_BUILD, [
        tenantId,
        body.project_id,
        project.number,
        body.git_branch,
        commit,
        { form: 'reference', build_args: body.build_args ?? null },
        spec,
        request.userId,
      ]);
      await client.query('COMMIT');
      return created[0];
    } catch (error) {
      await client.query('ROLLBACK');
      // builds_active_duplicate_key: a queued build of this project, branch and commit exists.
      if (error.code === '23505') throw new ConflictException();
      throw error;
    } finally {
      client.release();
    }
  }
}
Inject(POOL)(BuildsController, undefined, 0);
Inject(CONFIG)(BuildsController, undefined, 1);
Controller('api/v1/builds')(BuildsController);
UseGuards(BearerGuard)(BuildsController);
route(BuildsController, 'get', Get(':id'), [Param('id'), Headers('x-tenant-id')]);
route(BuildsController, 'list', Get(), [Headers('x-tenant-id'), Query()]);
route(BuildsController, 'create', Post(), [Headers('x-tenant-id'), Req(), Body()]);

/** What the bench polls until the app listens. */
class HealthController {
  live() {
    return { status: 'ok' };
  }
}
Controller()(HealthController);
route(HealthController, 'live', Get('healthz'), []);

/** Applies a method decorator and one parameter decorator per argument, as TypeScript would. */
function route(controller, method, decorator, parameters) {
  const { prototype } = controller;
  parameters.forEach((parameter, index) => parameter(prototype, method, index));
  decorator(prototype, method, Object.getOwnPropertyDescriptor(prototype, method));
}

const config = loadConfig();
if (config.jwtSecret.kind === 'generated')
  throw new Error('the bare app needs the secret kiln uses: set KILN_JWT_SECRET');
const pool = new pg.Pool({ connectionString: config.databaseUrl, max: 10 });

class BareModule {}
Module({
  controllers: [HealthController, BuildsController],
  providers: [
    { provide: POOL, useValue: pool },
    { provide: CONFIG, useValue: config },
    // Built once, as kiln's JWT_KEY: jsonwebtoken parses a string secret as PEM on every verify.
    { provide: JWT_KEY, useValue: createSecretKey(Buffer.from(config.jwtSecret.secret)) },
  ],
})(BareModule);

const app = await NestFactory.create(BareModule, { logger: ['error', 'warn'] });
await app.listen(config.port, config.host);

process.on('SIGTERM', () => {
  void (async () => {
    await app.close();
    await pool.end();
    process.exit(0);
  })();
});
