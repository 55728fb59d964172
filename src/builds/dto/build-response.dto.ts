import { ApiProperty, ApiPropertyOptional } from '../../common/openapi-decorators.js';
import { BUILD_STATUSES, type BuildStatus } from '../../lifecycle/build-state.js';
import { FAILURE_REASONS, type FailureReason } from '../../manifest/failure-reasons.js';

/** The create and retry responses carry this subset of a Build. */
export class BuildSummaryDto {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ format: 'uuid' }) project_id!: string;
  @ApiProperty({ minimum: 0 }) build_number!: number;
  @ApiPropertyOptional({ type: String, nullable: true }) git_branch!: string | null;
  @ApiProperty({ enum: BUILD_STATUSES }) status!: BuildStatus;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({ format: 'date-time' }) updated_at!: string;
}

/**
 * Where a started build stands while it waits to run (docs/admission.md): beyond the spec's
 * fields, present only while the build waits.
 */
export class BuildQueueDto {
  @ApiPropertyOptional({
    type: Number,
    nullable: true,
    minimum: 1,
    description:
      '1-based place among the waiting builds of the installation, in the order admission takes them (weighted fair share across tenants, first started first within one); null once admitted, while the cluster holds its pod back',
  })
  position!: number | null;
  @ApiProperty({
    description:
      'What the build waits for: InstallationLimit, TenantLimit, ProjectLimit or Admissible (a slot is free, it starts within moments) while it waits to be admitted; once admitted, what the cluster says: ClusterQuota, Unschedulable, ImagePull, CreateContainerConfigError, …',
    example: 'InstallationLimit',
  })
  reason!: string;
  @ApiProperty({
    description: 'The reason in words',
    example: 'all 4 build slots of this installation are in use',
  })
  message!: string;
  @ApiPropertyOptional({
    type: String,
    nullable: true,
    format: 'date-time',
    description:
      'A guess at when it starts, from how long recent builds ran; null when there is nothing to guess from',
  })
  estimated_start!: string | null;
}

/** Where a build made by a trigger came from. */
export class BuildTriggerDto {
  @ApiProperty({ format: 'uuid', description: 'The trigger (it may since have been deleted)' })
  id!: string;
  @ApiProperty({ type: String, nullable: true, enum: ['push', 'tag', 'pull_request'] })
  event!: string | null;
  @ApiProperty({
    type: String,
    nullable: true,
    description: 'Who pushed, as the git host names them',
  })
  pusher!: string | null;
}

/** The full Build, as GET /builds/{id} answers it. */
export class BuildDto extends BuildSummaryDto {
  @ApiPropertyOptional({ type: String, nullable: true }) git_commit!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true }) git_author_name!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true, format: 'email' }) git_author_email!:
    string | null;
  @ApiPropertyOptional({ type: String, nullable: true }) error_message!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true, format: 'date-time' }) started_at!:
    string | null;
  @ApiPropertyOptional({ type: String, nullable: true, format: 'date-time' }) completed_at!:
    string | null;
  // Beyond the spec's fields (issue 15): what a successful build pushed, when kiln learned it.
  @ApiPropertyOptional({
    type: String,
    nullable: true,
    pattern: '^sha256:[0-9a-f]{64}$',
    description: 'The digest of the image the build pushed; null until a build succeeds with one',
  })
  image_digest!: string | null;
  @ApiPropertyOptional({
    type: [String],
    description:
      'Each reference the build pushed, `registry/repository:tag@sha256:…`; empty when none is known',
  })
  images!: string[];
  @ApiPropertyOptional({
    enum: FAILURE_REASONS,
    nullable: true,
    description:
      'Why a failed build failed, as a code (BuildFailed: its own step failed; TimedOut, OutOfMemory, PodEvicted, ImagePullFailed and the others: the platform or its settings); null unless failed',
  })
  failure_reason!: FailureReason | null;
  @ApiPropertyOptional({
    type: Boolean,
    description:
      'Pinned: the retention policy never deletes this build (PUT/DELETE /builds/{id}/keep); false by default',
  })
  keep!: boolean;
  @ApiPropertyOptional({
    type: () => BuildTriggerDto,
    nullable: true,
    description:
      'The trigger that made the build from a git push, tag or pull request (docs/adr/0053-triggers.md); null for a build a caller made',
  })
  trigger!: BuildTriggerDto | null;
  @ApiPropertyOptional({
    type: String,
    nullable: true,
    pattern: '^(attached|stored-only|failed: .+)$',
    description:
      'The signed provenance of a successful build (docs/provenance.md): `attached` (stored and attached to every pushed image in its registry), `stored-only` (stored and served by GET /builds/{id}/provenance; nothing to attach it to, e.g. an S3 or packer build), or `failed: …` (why it could not be signed, stored or attached). Null for a build without provenance (not successful, or built before kiln made it)',
  })
  provenance!: string | null;
  @ApiPropertyOptional({
    type: BuildQueueDto,
    description:
      'Present while a started (in_progress) build waits to run: for a slot, or for the cluster to run its pod',
  })
  queue?: BuildQueueDto;
}

/** The wizard client reads the created build from `data`. */
export class WizardBuildEnvelopeDto {
  @ApiProperty({ type: BuildSummaryDto }) data!: BuildSummaryDto;
}

/** A page of builds: GET /builds. */
export class BuildListDto {
  @ApiProperty({ type: [BuildDto] }) builds!: BuildDto[];
  @ApiProperty({
    minimum: 0,
    description:
      'Builds matching the filters. Exact while at most KILN_LIST_EXACT_COUNT_LIMIT (10,000 by default) match, and on the last page; past that the database planner’s estimate, never below the limit + 1. It never contradicts the page: when has_more is true it exceeds the builds up to this page’s end. Page through with has_more, which is always exact.',
  })
  total_count!: number;
  @ApiProperty({ minimum: 1 }) page!: number;
  @ApiProperty({ minimum: 1, maximum: 100 }) limit!: number;
  @ApiProperty({
    description: 'True when another build follows this page (exact, whatever total_count says)',
  })
  has_more!: boolean;
}

export class BuildProgressDto {
  @ApiProperty({ minimum: 0 }) current_step!: number;
  @ApiProperty({ minimum: 0 }) total_steps!: number;
  @ApiProperty({ minimum: 0, maximum: 100 }) percentage!: number;
}

/** A build's status and progress: GET /builds/{id}/status. */
export class BuildStatusDto {
  @ApiProperty({ format: 'uuid' }) build_id!: string;
  @ApiProperty({ enum: BUILD_STATUSES }) status!: BuildStatus;
  @ApiPropertyOptional({ type: BuildProgressDto, nullable: true })
  progress!: BuildProgressDto | null;
  @ApiPropertyOptional({ type: String, nullable: true, format: 'date-time' }) started_at!:
    string | null;
  @ApiPropertyOptional({ type: String, nullable: true, format: 'date-time' })
  estimated_completion!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true }) error!: string | null;
  @ApiPropertyOptional({
    type: BuildQueueDto,
    description:
      'Present while a started (in_progress) build waits to run: for a slot, or for the cluster to run its pod',
  })
  queue?: BuildQueueDto;
}
