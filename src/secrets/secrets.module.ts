import { Global, Module } from '@nestjs/common';
import { resolveSecretSource } from './secret-source.js';
import { KilnConfig } from '../config/config.js';
import { SecretSealer } from './secret-sealer.js';

/**
 * The sealer of build secrets, for every role: the API seals, the runners unseal. Its key comes
 * from KILN_SECRETS_KEY(_FILE), or one kiln keeps in KILN_DATA_DIR (a single process; the api and
 * operator roles must share the key, as the chart does).
 */
@Global()
@Module({
  providers: [
    {
      provide: SecretSealer,
      inject: [KilnConfig],
      useFactory: async (config: KilnConfig) =>
        new SecretSealer(await resolveSecretSource(config.secretsKey)),
    },
  ],
  exports: [SecretSealer],
})
export class SecretsModule {}
