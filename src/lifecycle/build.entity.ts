import {
  Column,
  CreateDateColumn,
  Entity,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';
import type { BuildSpec } from '../manifest/build-spec.js';
import type { BuildManifest } from '../manifest/types.js';
import type { BuildStatus } from './build-state.js';
import type { FailureReason } from '../manifest/failure-reasons.js';

/**
 * What a build was asked to do, kept verbatim so a retry runs the same thing. The reference form
 * carries only build arguments; the wizard form carries the normalised manifest.
 */
export type BuildConfigSnapshot =
  | { form: 'reference'; build_args: Record<string, string> | null }
  | { form: 'wizard'; manifest: BuildManifest }
  /** A Build resource applied with kubectl: its spec is the build's spec. */
  | { form: 'resource'; namespace: string; name: string; uid: string };

@Entity('builds')
export class BuildEntity {
  @PrimaryGeneratedColumn('uuid')
  id!: string;

  @Column('uuid', { name: 'tenant_id' })
  tenantId!: string;

  @Column('uuid', { name: 'project_id' })
  projectId!: string;

  @Column('integer', { name: 'build_number' })
  buildNumber!: number;

  @Column('text')
  status!: BuildStatus;

  @Column('text', { name: 'git_branch', nullable: true })
  gitBranch!: string | null;

  @Column('text', { name: 'git_commit', nullable: true })
  gitCommit!: string | null;

  @Column('text', { name: 'git_author_name', nullable: true })
  gitAuthorName!: string | null;

  @Column('text', { name: 'git_author_email', nullable: true })
  gitAuthorEmail!: string | null;

  /** The build method (wizard form); null for a reference-form build. */
  @Column('text', { nullable: true })
  method!: string | null;

  @Column('jsonb')
  config!: BuildConfigSnapshot;

  /** What runs: captured at create from the request, the project and kiln's defaults. */
  @Column('jsonb')
  spec!: BuildSpec;

  @Column('text', { name: 'error_message', nullable: true })
  errorMessage!: string | null;

  @Column('text', { name: 'failure_reason', nullable: true })
  failureReason!: FailureReason | null;

  @Column('text', { name: 'cancel_reason', nullable: true })
  cancelReason!: string | null;

  @Column('uuid', { name: 'retry_of', nullable: true })
  retryOf!: string | null;

  @Column('integer', { name: 'progress_current', nullable: true })
  progressCurrent!: number | null;

  @Column('integer', { name: 'progress_total', nullable: true })
  progressTotal!: number | null;

  /** The runner's handle on the run (a Build CR name, a local process id…). */
  @Column('text', { name: 'runner_ref', nullable: true })
  runnerRef!: string | null;

  @Column('text', { name: 'idempotency_key', nullable: true })
  idempotencyKey!: string | null;

  @Column('text', { name: 'request_hash', nullable: true })
  requestHash!: string | null;

  /**
   * The digest of what decides the build's output (specDigest); of a project's queued and running
   * builds no two share one. Null for builds created before it existed: no rule applies to them.
   */
  @Column('text', { name: 'spec_digest', nullable: true })
  specDigest!: string | null;

  @Column('uuid', { name: 'created_by', nullable: true })
  createdBy!: string | null;

  /** The digest of the image a successful build pushed, when kiln learned it. */
  @Column('text', { name: 'image_digest', nullable: true })
  imageDigest!: string | null;

  /** Each reference that build pushed, `registry/repo:tag@sha256:…`; empty when none is known. */
  @Column('jsonb')
  images!: string[];

  /** Pinned: retention never deletes it (docs/adr/0050-retention.md). */
  @Column('boolean', { default: false })
  keep!: boolean;

  /** The trigger that made it (docs/adr/0053-triggers.md); null for a build made by a caller. */
  @Column('uuid', { name: 'trigger_id', nullable: true })
  triggerId!: string | null;

  /** The git event of that trigger: push, tag or pull_request. */
  @Column('text', { name: 'trigger_event', nullable: true })
  triggerEvent!: string | null;

  /** Who pushed, as the provider names them. */
  @Column('text', { name: 'triggered_by', nullable: true })
  triggeredBy!: string | null;

  /**
   * The build's signed provenance: `attached`, `stored-only` or `failed: …`; null when it has
   * none (docs/adr/0054-provenance.md).
   */
  @Column('text', { nullable: true })
  provenance!: string | null;

  @Column('timestamptz', { name: 'started_at', nullable: true })
  startedAt!: Date | null;

  @Column('timestamptz', { name: 'completed_at', nullable: true })
  completedAt!: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}
