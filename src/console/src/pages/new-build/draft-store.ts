import { type Draft, emptyDraft } from './draft.js';
import type { StepId } from './validation.js';

/** The wizard's state as kept between page loads. */
export interface Saved {
  readonly draft: Draft;
  readonly step: StepId;
}

const KEY = 'kiln.newBuild';

/**
 * The draft is kept in sessionStorage (this tab only, like the session): an expired session sends
 * the user to sign in and back to /builds/new, which finds the draft where it was left. It belongs
 * to one tenant: another tenant's projects would not match.
 */
export function loadDraft(tenantId: string): Saved | undefined {
  try {
    const text = sessionStorage.getItem(KEY);
    if (text === null) return undefined;
    const saved = JSON.parse(text) as Saved & { tenantId: string };
    if (saved.tenantId !== tenantId) return undefined;
    // Fields added to the wizard since the draft was saved get their defaults.
    return { draft: { ...emptyDraft(), ...saved.draft }, step: saved.step };
  } catch {
    return undefined; // storage disabled or garbled: start afresh
  }
}

export function saveDraft(tenantId: string, saved: Saved): void {
  try {
    sessionStorage.setItem(KEY, JSON.stringify({ ...saved, tenantId }));
  } catch {
    // Storage refused (private mode, quota): the draft lives in memory for this page only.
  }
}

/** After a build was created from it. */
export function clearDraft(): void {
  try {
    sessionStorage.removeItem(KEY);
  } catch {
    // Nothing was kept.
  }
}
