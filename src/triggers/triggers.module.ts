import { Module } from '@nestjs/common';
import type { Logger } from 'pino';
import { TenancyModule } from '../auth/tenancy.module.js';
import { BuildsModule } from '../builds/builds.module.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import type { ReferenceResolver } from '../integrations/build-access.js';
import { IntegrationsModule, REFERENCE_RESOLVER } from '../integrations/integrations.module.js';
import { LogSink } from '../logs/log-sink.js';
import { LogsModule } from '../logs/logs.module.js';
import { ProjectsModule } from '../projects/projects.module.js';
import { RateLimitModule } from '../ratelimit/rate-limit.module.js';
import { posterFor } from './commit-status/commit-status.js';
import { StatusReporter } from './commit-status/status-reporter.js';
import { StatusStoreRepository } from './commit-status/status-store.repository.js';
import { lsRemote } from './ls-remote.js';
import { PollStoreRepository } from './poll-store.repository.js';
import { TriggerPoller } from './poller.js';
import { ProjectsRepository } from '../projects/projects.repository.js';
import { TriggerDispatcher } from './trigger-dispatcher.js';
import { TriggerWorker } from './trigger-worker.js';
import { TriggersController } from './triggers.controller.js';
import { TriggersRepository } from './triggers.repository.js';
import { TriggersService } from './triggers.service.js';
import { WebhookReceiver } from './webhook-receiver.js';
import { WebhooksController } from './webhooks.controller.js';

/**
 * Builds from git pushes (docs/adr/0053-triggers.md): the triggers' routes, the webhook route,
 * and the background work (polling, commit statuses, held builds). Composed with the API, where
 * builds are made and started.
 */
@Module({
  imports: [
    TenancyModule,
    BuildsModule,
    ProjectsModule,
    RateLimitModule,
    IntegrationsModule,
    LogsModule,
  ],
  controllers: [TriggersController, WebhooksController],
  providers: [
    TriggersRepository,
    TriggersService,
    TriggerDispatcher,
    WebhookReceiver,
    TriggerWorker,
    StatusStoreRepository,
    PollStoreRepository,
    {
      provide: TriggerPoller,
      inject: [
        PollStoreRepository,
        ProjectsRepository,
        REFERENCE_RESOLVER,
        TriggersRepository,
        TriggerDispatcher,
        KilnConfig,
      ],
      useFactory: (
        store: PollStoreRepository,
        projects: ProjectsRepository,
        resolver: ReferenceResolver,
        triggers: TriggersRepository,
        dispatcher: TriggerDispatcher,
        config: KilnConfig,
      ) =>
        new TriggerPoller({
          store,
          batchSize: 20,
          credentials: {
            async forProject(tenantId, projectId) {
              const project = await projects.findInTenant(tenantId, projectId);
              const git = project?.gitCredentials ?? null;
              if (git === null) return undefined;
              const resolved = await resolver.resolve(tenantId, {
                username: git.username,
                password: git.password,
              });
              if (!resolved.ok) {
                throw new Error(`the project's git credentials: ${resolved.message}`);
              }
              return { username: resolved.values.username!, password: resolved.values.password! };
            },
          },
          dispatch: {
            async receive(triggerId, deliveryId, event) {
              const trigger = await triggers.findAnyTenant(triggerId);
              if (trigger !== undefined) await dispatcher.receive(trigger, deliveryId, event);
            },
          },
          listRefs: (url, credentials) =>
            lsRemote(url, {
              inherited: config.childEnvironment,
              credentials,
              timeoutMs: config.triggers.pollTimeoutMs,
            }),
        }),
    },
    {
      provide: StatusReporter,
      inject: [StatusStoreRepository, REFERENCE_RESOLVER, LogSink, KilnConfig, LOGGER],
      useFactory: (
        store: StatusStoreRepository,
        resolver: ReferenceResolver,
        sink: LogSink,
        config: KilnConfig,
        logger: Logger,
      ) =>
        new StatusReporter({
          store,
          tokens: {
            async resolve(tenantId, reference) {
              const resolved = await resolver.resolve(tenantId, { token: reference });
              if (!resolved.ok) throw new Error(resolved.message);
              return resolved.values.token!;
            },
          },
          log: {
            async note(buildId, line) {
              await sink.append(buildId, [{ text: `WARN: ${line}`, container: 'kiln' }]);
            },
          },
          posterFor: (provider) =>
            posterFor(provider, { timeoutMs: config.externalCalls.timeoutMs }),
          publicUrl: config.triggers.publicUrl,
          logger: logger.child({ component: 'commit-status' }),
        }),
    },
  ],
  exports: [TriggerDispatcher, TriggerWorker],
})
export class TriggersModule {
  constructor(worker: TriggerWorker, poller: TriggerPoller, statuses: StatusReporter) {
    worker.add({ name: 'polls', run: () => poller.tick() });
    worker.add({ name: 'commit statuses', run: () => statuses.tick() });
  }
}
