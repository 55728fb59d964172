import type { components } from '../../api/schema.gen.js';
import type { Problems } from './forms.js';

type Schemas = components['schemas'];
type CreateTrigger = Schemas['CreateTriggerDto'];
export type TriggerProvider = CreateTrigger['provider'];
export type TriggerEvent = NonNullable<CreateTrigger['events']>[number];
export type TriggerConcurrency = NonNullable<CreateTrigger['concurrency']>;

/** The git hosts, as the form offers them; a Record, so a provider the API adds must be named. */
export const PROVIDERS: Readonly<Record<TriggerProvider, string>> = {
  github: 'GitHub',
  gitlab: 'GitLab',
  gitea: 'Gitea',
  forgejo: 'Forgejo',
};

export const EVENTS: Readonly<Record<TriggerEvent, string>> = {
  push: 'push: a push to a branch',
  tag: 'tag: a new tag',
  pull_request: 'pull_request: a pull request opened or given new commits',
};

export const CONCURRENCY: Readonly<Record<TriggerConcurrency, string>> = {
  parallel: 'parallel: every push builds at once',
  serial: 'serial: one build per branch at a time, the next waits',
  'latest-only': 'latest-only: a newer push cancels the older builds of its branch',
};

/** The fields the create form has, under the API's names (so a 400's details land on them). */
export const TRIGGER_FIELDS = ['name', 'provider', 'events', 'branches', 'concurrency'] as const;

export interface TriggerForm {
  readonly name: string;
  readonly provider: TriggerProvider;
  /** Branch patterns as typed: separated by spaces or commas. */
  readonly branches: string;
  readonly events: readonly TriggerEvent[];
  readonly concurrency: TriggerConcurrency;
}

/** The create form's starting values: the API's own defaults. */
export function triggerForm(): TriggerForm {
  return { name: '', provider: 'github', branches: '', events: ['push'], concurrency: 'parallel' };
}

/** Glob patterns typed into one field, split on spaces and commas (no pattern has either). */
export function patterns(text: string): string[] {
  return text.split(/[\s,]+/).filter((pattern) => pattern !== '');
}

/**
 * The form as POST /projects/{id}/triggers takes it, or what stops it. No branch typed: the
 * field is left out, for the API's default (every branch).
 */
export function triggerCreate(
  form: TriggerForm,
): { readonly body: CreateTrigger } | { readonly problems: Problems } {
  const problems: Record<string, string> = {};
  const name = form.name.trim();
  if (name === '') problems['name'] = 'Give the trigger a name, e.g. main-pushes';
  if (form.events.length === 0) problems['events'] = 'Choose at least one event';
  if (Object.keys(problems).length > 0) return { problems };
  const branches = patterns(form.branches);
  return {
    body: {
      name,
      provider: form.provider,
      events: [...form.events],
      ...(branches.length > 0 && { branches }),
      concurrency: form.concurrency,
    },
  };
}

type Outcome = Schemas['DeliveryResponse']['outcome'];

/** The badge colour of a delivery's outcome (the word is always shown beside it). */
export const OUTCOME_BADGE: Readonly<Record<Outcome, string>> = {
  pending: 'in_progress',
  built: 'success',
  filtered: 'queued',
  duplicate: 'queued',
  refused: 'failed',
  failed: 'failed',
};
