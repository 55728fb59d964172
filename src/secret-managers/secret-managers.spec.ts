import type { VaultReference } from '../manifest/secret-reference.js';
import { createSecretManager } from './secret-managers.js';

// The adapter's module stands in for itself here: what is under test is when it is loaded and
// how often its adapter is made, not what it answers (test/secret-manager-vault.spec.ts).
const vault = { loads: 0, made: 0, failNext: false };
jest.mock('./vault.js', () => {
  vault.loads++;
  return {
    VaultSecretManager: class {
      readonly type = 'vault';
      constructor() {
        vault.made++;
        if (vault.failNext) {
          vault.failNext = false;
          throw new Error('the adapter could not be made');
        }
      }
      resolve(reference: VaultReference) {
        return Promise.resolve(`value of ${reference.text}`);
      }
    },
  };
});

const SETTINGS = {
  address: 'https://vault.example:8200',
  auth: { method: 'token', tokenFile: '/nonexistent' },
} as const;
const REFERENCE: VaultReference = {
  manager: 'vault',
  text: 'vault:kv/data/app#token',
  mount: 'kv',
  path: 'app',
  key: 'token',
};

describe(createSecretManager.name, () => {
  beforeEach(() => {
    vault.made = 0;
    vault.failNext = false;
  });

  it('imports the adapter on the first resolve, not before, and makes one for every resolve', async () => {
    const manager = createSecretManager('vault', SETTINGS);

    expect(manager.type).toBe('vault');
    expect(vault).toMatchObject({ loads: 0, made: 0 });
    expect(await manager.resolve(REFERENCE)).toBe('value of vault:kv/data/app#token');
    expect(await manager.resolve(REFERENCE)).toBe('value of vault:kv/data/app#token');
    expect(vault).toMatchObject({ loads: 1, made: 1 });
  });

  it('tries again on the next resolve when the adapter could not be made', async () => {
    const manager = createSecretManager('vault', SETTINGS);
    vault.failNext = true;

    await expect(manager.resolve(REFERENCE)).rejects.toThrow('the adapter could not be made');
    expect(await manager.resolve(REFERENCE)).toBe('value of vault:kv/data/app#token');
    expect(vault.made).toBe(2);
  });

  it('rejects with the reason of an aborted signal, making nothing', async () => {
    const manager = createSecretManager('vault', SETTINGS);
    const reason = new Error('the build was cancelled');

    await expect(manager.resolve(REFERENCE, AbortSignal.abort(reason))).rejects.toBe(reason);
    expect(vault.made).toBe(0);
  });
});
