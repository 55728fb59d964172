import { StatusError } from './errors.js';

/** A validating admission webhook that says no, as `double.admissionWebhooks.deny(...)` sets up. */
export interface WebhookDenial {
  /** The webhook's name as its ValidatingWebhookConfiguration lists it, e.g. `policy.example.com`. */
  name: string;
  /** What the webhook answers (its `status.message`). */
  message: string;
  /** Only creates in this namespace (default: every namespace). */
  namespace?: string;
  /** Only creates of this resource, by plural (default `pods`). */
  resource?: string;
  /** Deny this many creates, then allow again (default: until lifted). */
  count?: number;
  /**
   * The webhook's `status.code` (default 400, what kube-apiserver answers for a webhook that
   * denies without one; policy engines often send 403). A code below 400 becomes 400.
   */
  code?: number;
  /** The webhook's `status.reason` (default none, so the Status has no reason). */
  reason?: string;
}

interface Rule extends WebhookDenial {
  remaining: number;
}

/**
 * The fault hook for validating admission webhooks: the double calls no webhook, but a denial set
 * up here refuses matching creates the way kube-apiserver relays a webhook's `allowed: false`
 * (webhookerrors.ToStatusErr): `admission webhook "<name>" denied the request: <message>`. It
 * applies to every create of the resource, a controller's too (a Job's pods get FailedCreate).
 * The first matching denial answers, as the first webhook to deny ends the real chain.
 */
export class AdmissionWebhooks {
  private readonly rules: Rule[] = [];

  /** Denies matching creates from now on; returns the function that lifts this denial. */
  deny(denial: WebhookDenial): () => void {
    const rule: Rule = { ...denial, remaining: denial.count ?? Number.POSITIVE_INFINITY };
    this.rules.push(rule);
    return () => {
      rule.remaining = 0;
    };
  }

  /** Lifts every denial. */
  clear(): void {
    for (const rule of this.rules) rule.remaining = 0;
    this.rules.length = 0;
  }

  /** The refusal for a create of `resource` in `namespace`, or undefined when admitted. */
  check(resource: string, namespace: string | undefined, dryRun: boolean): StatusError | undefined {
    const rule = this.rules.find(
      (r) =>
        r.remaining > 0 &&
        (r.resource ?? 'pods') === resource &&
        (r.namespace === undefined || r.namespace === namespace),
    );
    if (rule === undefined) return undefined;
    // A dry run calls the webhook too (the real one must declare itself side-effect free), but
    // should not use up a counted denial meant for the real create.
    if (!dryRun) rule.remaining--;
    return new StatusError(
      Math.max(400, rule.code ?? 400),
      rule.reason ?? '',
      `admission webhook "${rule.name}" denied the request: ${rule.message}`,
    );
  }
}
