/*
 * `build_config.scan_policy`: which findings fail a build (reason PolicyViolation). Without a
 * policy, or without fail_on, findings never fail a build; an ignore list alone changes nothing.
 */
import {
  enumValue,
  isAbsent,
  isPlainObject,
  rejectUnknownKeys,
  withoutUndefined,
} from './fields.js';
import type { Details, ScanPolicy } from './types.js';
import {
  compareFindings,
  type Finding,
  isAtLeast,
  SEVERITIES,
  type Severity,
} from './severities.js';

export type PolicyVerdict =
  { violated: false } | { violated: true; summary: string; counted: Finding[] };

const SCAN_POLICY_KEYS = ['fail_on', 'ignore'] as const;
export const IGNORE_MAX = 1000;
/** Room for Clair's RHSA names ("RHSA-2021:4198: binutils security update (Moderate)"). */
export const IGNORE_ID_MAX = 200;
/** Findings the summary names; the rest are counted ("and 7 more"). */
const SUMMARY_LISTED = 5;
/** One listed finding, at most; with the header this keeps a summary under 1000 characters. */
const SUMMARY_ENTRY_MAX = 150;

/**
 * Reads `scan_policy` from a manifest: undefined when absent or not an object. Every problem goes
 * into `details` under its exact path (`manifest.build_config.scan_policy.ignore.3`).
 */
export function readScanPolicy(
  value: unknown,
  path: string,
  details: Details,
): ScanPolicy | undefined {
  if (isAbsent(value)) return undefined;
  if (!isPlainObject(value)) {
    details[path] = 'must be an object with fail_on and/or ignore';
    return undefined;
  }
  rejectUnknownKeys(value, SCAN_POLICY_KEYS, path, details);
  return withoutUndefined({
    fail_on: isAbsent(value.fail_on)
      ? undefined
      : enumValue(value.fail_on, SEVERITIES, `${path}.fail_on`, details),
    ignore: readIgnore(value.ignore, `${path}.ignore`, details),
  });
}

/** Trimmed ids, each once (CVE-/GHSA- ids compared in any case). */
function readIgnore(value: unknown, path: string, details: Details): string[] | undefined {
  if (isAbsent(value)) return undefined;
  if (!Array.isArray(value)) {
    details[path] = 'must be an array of vulnerability ids';
    return undefined;
  }
  if (value.length > IGNORE_MAX) {
    details[path] = `must list at most ${IGNORE_MAX} ids`;
    return undefined;
  }
  const ids = new Map<string, string>();
  value.forEach((element: unknown, index) => {
    const at = `${path}.${index}`;
    if (typeof element !== 'string') {
      details[at] = 'must be a string';
    } else if (element.trim() === '') {
      details[at] = 'must not be empty';
    } else if (element.trim().length > IGNORE_ID_MAX) {
      details[at] = `must be at most ${IGNORE_ID_MAX} characters`;
    } else if (!ids.has(ignoreKey(element.trim()))) {
      ids.set(ignoreKey(element.trim()), element.trim());
    }
  });
  return [...ids.values()];
}

/**
 * Whether the findings exceed the policy: those at or above fail_on that are not ignored. The
 * summary names at most five of them (most severe first) and stays under 1000 characters.
 */
export function evaluatePolicy(
  policy: ScanPolicy | undefined,
  findings: readonly Finding[],
): PolicyVerdict {
  const failOn = policy?.fail_on;
  if (failOn === undefined) return { violated: false };
  const ignored = new Set((policy?.ignore ?? []).map(ignoreKey));
  const counted = findings
    .filter((finding) => isAtLeast(finding.severity, failOn) && !ignored.has(ignoreKey(finding.id)))
    .sort(compareFindings);
  if (counted.length === 0) return { violated: false };
  return { violated: true, summary: summary(failOn, counted), counted };
}

/** CVE and GHSA ids are case-insensitive; other scanners' ids are compared exactly. */
function ignoreKey(id: string): string {
  return /^(?:cve|ghsa)-/i.test(id) ? id.toLowerCase() : id;
}

/** `scan policy fail_on=high: 3 findings at or above high (2 critical, 1 high): CVE-… (pkg 1.0), …` */
function summary(failOn: Severity, counted: readonly Finding[]): string {
  const bySeverity = SEVERITIES.map(
    (severity) => [severity, counted.filter((f) => f.severity === severity).length] as const,
  )
    .filter(([, count]) => count > 0)
    .map(([severity, count]) => `${count} ${severity}`);
  const listed = counted.slice(0, SUMMARY_LISTED).map(entry);
  if (counted.length > SUMMARY_LISTED) listed.push(`and ${counted.length - SUMMARY_LISTED} more`);
  const noun = counted.length === 1 ? 'finding' : 'findings';
  return (
    `scan policy fail_on=${failOn}: ${counted.length} ${noun} at or above ${failOn} ` +
    `(${bySeverity.join(', ')}): ${listed.join(', ')}`
  );
}

function entry(finding: Finding): string {
  const installed = [finding.package, finding.version].filter((part) => part !== '').join(' ');
  const text = `${finding.id} (${installed})`;
  return text.length <= SUMMARY_ENTRY_MAX ? text : `${text.slice(0, SUMMARY_ENTRY_MAX - 1)}…`;
}
