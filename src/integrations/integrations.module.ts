import { Module } from '@nestjs/common';
import { KilnConfig } from '../config/config.js';
import { ProjectsRepository } from '../projects/projects.repository.js';
import { S3ImageStore } from '../registries/s3-upload.js';
import { OciRegistryPreflight } from '../registries/oci-preflight.js';
import { createSecretManager } from '../secret-managers/secret-managers.js';
import { SecretResolver } from '../secret-managers/secret-resolver.js';
import { SecretSealer } from '../secrets/secret-sealer.js';
import { BuildAccess, type ReferenceResolver } from './build-access.js';
import { IntegrationsRepository } from './integrations.repository.js';
import { IntegrationsService } from './integrations.service.js';
import { TenantRegistryEntity } from './tenant-registry.entity.js';
import { TenantSecretManagerEntity } from './tenant-secret-manager.entity.js';

/** The entities this feature maps; src/app.entities.ts registers them with the DataSource. */
export const INTEGRATIONS_ENTITIES = [TenantSecretManagerEntity, TenantRegistryEntity];

/**
 * The token of the ReferenceResolver: a tenant's secret references resolved through its secret
 * managers, for what kiln itself reaches (a trigger's status token, a project's git credentials
 * when polling). One adapter per tenant and manager, as builds use.
 */
export const REFERENCE_RESOLVER = Symbol('kiln.reference-resolver');

/** Tenants' secret-manager and registry settings (the admin CLI sets them, runners read them). */
@Module({
  providers: [
    IntegrationsRepository,
    IntegrationsService,
    {
      provide: REFERENCE_RESOLVER,
      inject: [IntegrationsService, KilnConfig],
      useFactory: (integrations: IntegrationsService, config: KilnConfig): ReferenceResolver =>
        new SecretResolver(integrations, (type, settings) =>
          createSecretManager(type, settings, config.externalCalls),
        ),
    },
  ],
  exports: [IntegrationsService, REFERENCE_RESOLVER],
})
export class IntegrationsModule {}

/**
 * BuildAccess, which the runners ask when a build starts: the tenant's settings, the adapters
 * beside their ports (src/secret-managers, src/registries), the sealer of build secrets.
 */
@Module({
  imports: [IntegrationsModule],
  providers: [
    // ProjectsRepository alone (project git credentials), not ProjectsModule: the operator role
    // imports this module and must not mount the projects routes.
    ProjectsRepository,
    {
      provide: BuildAccess,
      inject: [IntegrationsService, ProjectsRepository, SecretSealer, KilnConfig],
      useFactory: (
        integrations: IntegrationsService,
        projects: ProjectsRepository,
        sealer: SecretSealer,
        config: KilnConfig,
      ) =>
        new BuildAccess({
          registries: integrations,
          projects,
          resolver: new SecretResolver(integrations, (type, settings) =>
            createSecretManager(type, settings, config.externalCalls),
          ),
          checkBucket: (target, signal) =>
            new S3ImageStore(target, config.externalCalls).checkBucket(signal),
          preflight: (type) => {
            const preflight = new OciRegistryPreflight(type);
            return {
              checkPush: (repository, credentials, options) =>
                preflight.checkPush(repository, credentials, {
                  timeoutMs: config.externalCalls.timeoutMs,
                  ...options,
                }),
            };
          },
          sealer,
        }),
    },
  ],
  exports: [BuildAccess],
})
export class BuildAccessModule {}
