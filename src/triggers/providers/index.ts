import { forgejo, gitea } from './gitea.js';
import { github } from './github.js';
import { gitlab } from './gitlab.js';
import { PROVIDER_NAMES, type ProviderName, type WebhookProvider } from './provider.js';

export { PayloadError } from './payload.js';
export { PROVIDER_NAMES, type ProviderName, type WebhookProvider } from './provider.js';

const providers: Readonly<Record<ProviderName, WebhookProvider>> = {
  github,
  gitlab,
  gitea,
  forgejo,
};

export function isProviderName(name: string): name is ProviderName {
  return (PROVIDER_NAMES as readonly string[]).includes(name);
}

/** The provider of a trigger's `provider` column; a name kiln does not know is a bug, and throws. */
export function providerOf(name: string): WebhookProvider {
  if (!isProviderName(name)) throw new Error(`No webhook provider is named ${name}`);
  return providers[name];
}
