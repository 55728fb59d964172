/** The severities of scan findings and the one shape of a finding, whatever the scanner. */

/** Most severe first; the order fail_on compares in. */
export const SEVERITIES = ['critical', 'high', 'medium', 'low', 'negligible', 'unknown'] as const;
export type Severity = (typeof SEVERITIES)[number];

/** One vulnerability in one installed package, the same shape whatever the scanner. */
export interface Finding {
  /** CVE-…, GHSA-…, or the scanner's own id (SNYK-…, RHSA-…). */
  readonly id: string;
  readonly package: string;
  readonly version: string;
  readonly fixed_version: string | null;
  readonly severity: Severity;
}

/** True when `severity` is `threshold` or more severe. */
export function isAtLeast(severity: Severity, threshold: Severity): boolean {
  return SEVERITIES.indexOf(severity) <= SEVERITIES.indexOf(threshold);
}

/** Severity (critical first), then id, package and version. */
export function compareFindings(a: Finding, b: Finding): number {
  return (
    SEVERITIES.indexOf(a.severity) - SEVERITIES.indexOf(b.severity) ||
    order(a.id, b.id) ||
    order(a.package, b.package) ||
    order(a.version, b.version)
  );
}

function order(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
