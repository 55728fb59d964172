import type { MigrationInterface } from 'typeorm';
import { Tenancy1763769600000 } from './1763769600000-tenancy.js';
import { Builds1763856000000 } from './1763856000000-builds.js';
import { RateLimits1763942400000 } from './1763942400000-rate-limits.js';
import { BuildLogs1764028800000 } from './1764028800000-build-logs.js';
import { ActiveRetry1764115200000 } from './1764115200000-active-retry.js';
import { SecretManagersAndRegistries1764720000000 } from './1764720000000-secret-managers-and-registries.js';
import { ProjectDefaultRegistry1764201600000 } from './1764201600000-project-default-registry.js';
import { BuildSpec1764288000000 } from './1764288000000-build-spec.js';
import { BuildLogCounters1764374400000 } from './1764374400000-build-log-counters.js';
import { ImagePullFailed1764460800000 } from './1764460800000-image-pull-failed.js';
import { LogFollowerClaim1764547200000 } from './1764547200000-log-follower-claim.js';
import { BuildArtifacts1764633600000 } from './1764633600000-build-artifacts.js';
import { BuildListIndexes1764806400000 } from './1764806400000-build-list-indexes.js';
import { AccessNotifications1764892800000 } from './1764892800000-access-notifications.js';
import { BuildLogPurges1764979200000 } from './1764979200000-build-log-purges.js';
import { SpecDigest1765065600000 } from './1765065600000-spec-digest.js';
import { UrlCredentials1765152000000 } from './1765152000000-url-credentials.js';
import { Admission1765238400000 } from './1765238400000-admission.js';
import { AdmissionTimeouts1765324800000 } from './1765324800000-admission-timeouts.js';
import { AdmissionGeneration1765411200000 } from './1765411200000-admission-generation.js';
import { SystemAdmin1765497600000 } from './1765497600000-system-admin.js';
import { ApiTokens1765584000000 } from './1765584000000-api-tokens.js';
import { AuditEvents1765699200000 } from './1765699200000-audit-events.js';
import { Retention1765756800000 } from './1765756800000-retention.js';
import { Triggers1765843200000 } from './1765843200000-triggers.js';
import { Provenance1765929600000 } from './1765929600000-provenance.js';

/**
 * Every migration, oldest first. Listed explicitly (no glob) so the compiled app, the CLI and the
 * tests all run exactly the same set. Feature issues append here.
 */
export const MIGRATIONS: ReadonlyArray<new () => MigrationInterface> = [
  Tenancy1763769600000,
  Builds1763856000000,
  RateLimits1763942400000,
  BuildLogs1764028800000,
  ActiveRetry1764115200000,
  ProjectDefaultRegistry1764201600000,
  BuildSpec1764288000000,
  BuildLogCounters1764374400000,
  ImagePullFailed1764460800000,
  LogFollowerClaim1764547200000,
  BuildArtifacts1764633600000,
  SecretManagersAndRegistries1764720000000,
  BuildListIndexes1764806400000,
  AccessNotifications1764892800000,
  BuildLogPurges1764979200000,
  SpecDigest1765065600000,
  UrlCredentials1765152000000,
  Admission1765238400000,
  AdmissionTimeouts1765324800000,
  AdmissionGeneration1765411200000,
  SystemAdmin1765497600000,
  ApiTokens1765584000000,
  AuditEvents1765699200000,
  Retention1765756800000,
  Triggers1765843200000,
  Provenance1765929600000,
];
