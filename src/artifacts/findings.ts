/*
 * A scanner's report, normalised to one list of findings whatever the scanner, and how each
 * scanner is told to write that report.
 *
 * Decisions (tested in findings.spec.ts):
 * - A finding needs an id and a package; an entry without either makes the whole report unusable
 *   (the problem names the entry), because a finding nobody can identify cannot be ignored or fixed.
 * - A missing version is "" (trivy omits an empty InstalledVersion); a missing or empty fixed
 *   version is null; several fixed versions are joined with ", " (trivy's own style).
 * - A missing or unrecognised severity is 'unknown', the lowest: only `fail_on: unknown` counts it.
 * - The same id in the same package and version is one finding (snyk lists one per dependency
 *   path): the more severe severity and the first fixed version win.
 * - Findings are sorted by severity (critical first), then id, package and version.
 */
import { isPlainObject, type Json } from '../manifest/fields.js';
import {
  compareFindings,
  type Finding,
  isAtLeast,
  SEVERITIES,
  type Severity,
} from '../manifest/severities.js';
import type { Scanner } from '../manifest/tool-commands.js';

/** Normalises a scanner's JSON report: its findings (deduplicated, sorted), or why it is unusable. */
export function normalizeFindings(
  tool: Scanner,
  text: string,
): { findings: Finding[] } | { problem: string } {
  if (text.trim() === '') return { problem: 'the report is empty' };
  let report: unknown;
  try {
    report = JSON.parse(text);
  } catch (error) {
    return { problem: `not JSON: ${clip((error as Error).message)}` };
  }
  try {
    return { findings: deduplicate(READERS[tool](report)).sort(compareFindings) };
  } catch (error) {
    if (error instanceof Unusable) return { problem: error.message };
    throw error;
  }
}

/**
 * The findings kiln stored for a scan (the JSON of normalizeFindings' list), in that exact shape,
 * or undefined when the text is not such a list: a row kiln did not write, or a damaged one.
 */
export function readStoredFindings(text: string): Finding[] | undefined {
  let stored: unknown;
  try {
    stored = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(stored)) return undefined;
  const findings: Finding[] = [];
  for (const entry of stored as unknown[]) {
    if (!isStoredFinding(entry)) return undefined;
    const { id, package: pkg, version, fixed_version, severity } = entry;
    findings.push({ id, package: pkg, version, fixed_version, severity });
  }
  return findings;
}

function isStoredFinding(value: unknown): value is Finding {
  return (
    isPlainObject(value) &&
    typeof value.id === 'string' &&
    typeof value.package === 'string' &&
    typeof value.version === 'string' &&
    (value.fixed_version === null || typeof value.fixed_version === 'string') &&
    (SEVERITIES as readonly unknown[]).includes(value.severity)
  );
}

/** Findings per severity, every severity present (0 when none). */
export function summarize(findings: readonly Finding[]): Record<Severity, number> {
  const counts = Object.fromEntries(SEVERITIES.map((severity) => [severity, 0])) as Record<
    Severity,
    number
  >;
  for (const finding of findings) counts[finding.severity] += 1;
  return counts;
}

/** Words the scanners use, lower-cased. Clair v2's Defcon1 sits above critical. */
const SEVERITY_WORDS = new Map<string, Severity>([
  ['defcon1', 'critical'],
  ...SEVERITIES.map((severity) => [severity, severity] as const),
]);

function severityOf(value: unknown): Severity {
  return typeof value === 'string'
    ? (SEVERITY_WORDS.get(value.toLowerCase()) ?? 'unknown')
    : 'unknown';
}

/** A report that cannot be read; the message names the entry and what is wrong with it. */
class Unusable extends Error {}

const READERS: Readonly<Record<Scanner, (report: unknown) => Finding[]>> = {
  trivy: trivyFindings,
  grype: grypeFindings,
  clair: clairFindings,
  snyk: snykFindings,
};

/**
 * `trivy image --format json` (SchemaVersion 2, aquasecurity/trivy pkg/types/report.go):
 * Results[].Vulnerabilities[]; a Result without Vulnerabilities has none.
 */
function trivyFindings(report: unknown): Finding[] {
  if (Array.isArray(report)) {
    throw new Unusable(
      'this is the bare list trivy wrote before v0.20; kiln reads the SchemaVersion 2 report',
    );
  }
  const root = objectAt(report, 'the report');
  if (typeof root.SchemaVersion !== 'number') {
    throw new Unusable('SchemaVersion is missing: not a trivy JSON report (trivy --format json)');
  }
  return listAt(root.Results, 'Results').flatMap((result, r) => {
    const at = `Results[${r}].Vulnerabilities`;
    return listAt(objectAt(result, `Results[${r}]`).Vulnerabilities, at).map((entry, v) => {
      const path = `${at}[${v}]`;
      const vulnerability = objectAt(entry, path);
      return {
        id: textAt(vulnerability.VulnerabilityID, `${path}.VulnerabilityID`),
        package: textAt(vulnerability.PkgName, `${path}.PkgName`),
        version: optionalText(vulnerability.InstalledVersion, `${path}.InstalledVersion`) ?? '',
        fixed_version: optionalText(vulnerability.FixedVersion, `${path}.FixedVersion`) ?? null,
        severity: severityOf(vulnerability.Severity),
      };
    });
  });
}

/**
 * `grype -o json` (anchore/grype grype/presenter/models): matches[] of vulnerability
 * {id, severity, fix {versions, state}} and artifact {name, version}.
 */
function grypeFindings(report: unknown): Finding[] {
  const root = objectAt(report, 'the report');
  if (!Array.isArray(root.matches)) {
    throw new Unusable('matches is missing: not a grype JSON report (grype -o json)');
  }
  return root.matches.map((entry: unknown, m) => {
    const path = `matches[${m}]`;
    const match = objectAt(entry, path);
    const vulnerability = objectAt(match.vulnerability, `${path}.vulnerability`);
    const artifact = objectAt(match.artifact, `${path}.artifact`);
    return {
      id: textAt(vulnerability.id, `${path}.vulnerability.id`),
      package: textAt(artifact.name, `${path}.artifact.name`),
      version: optionalText(artifact.version, `${path}.artifact.version`) ?? '',
      fixed_version: grypeFix(vulnerability.fix, `${path}.vulnerability.fix`),
      severity: severityOf(vulnerability.severity),
    };
  });
}

/** grype lists fixed versions only when fix.state is "fixed"; not-fixed and wont-fix list none. */
function grypeFix(value: unknown, path: string): string | null {
  if (value === undefined || value === null) return null;
  return joinVersions(
    listAt(objectAt(value, path).versions, `${path}.versions`),
    `${path}.versions`,
  );
}

/**
 * `clairctl report --out json`: Clair v4's VulnerabilityReport (quay/claircore
 * vulnerabilityreport.go). package_vulnerabilities maps a package id to vulnerability ids; the
 * installed package's name and version come from packages, the id is the vulnerability's name.
 * Go writes an empty map as null, so null maps are empty.
 */
function clairFindings(report: unknown): Finding[] {
  if (report === null) {
    throw new Unusable('clairctl printed null: Clair returned no vulnerability report');
  }
  const root = objectAt(report, 'the report');
  if (typeof root.manifest_hash !== 'string') {
    throw new Unusable('manifest_hash is missing: not a Clair v4 vulnerability report');
  }
  const packages = mapAt(root.packages, 'packages');
  const vulnerabilities = mapAt(root.vulnerabilities, 'vulnerabilities');
  const links = mapAt(root.package_vulnerabilities, 'package_vulnerabilities');
  return Object.entries(links).flatMap(([packageId, ids]) => {
    const at = `package_vulnerabilities.${packageId}`;
    const pkg = objectAt(entryOf(packages, packageId, at, 'packages'), `packages.${packageId}`);
    return listAt(ids, at).map((id, i) => {
      if (typeof id !== 'string' && typeof id !== 'number') {
        throw new Unusable(`${at}[${i}] must be a vulnerability id`);
      }
      const key = String(id);
      const path = `vulnerabilities.${key}`;
      const vulnerability = objectAt(entryOf(vulnerabilities, key, at, 'vulnerabilities'), path);
      return {
        id:
          optionalText(vulnerability.name, `${path}.name`) ??
          textAt(vulnerability.id, `${path}.id`),
        package: textAt(pkg.name, `packages.${packageId}.name`),
        version: optionalText(pkg.version, `packages.${packageId}.version`) ?? '',
        fixed_version:
          optionalText(vulnerability.fixed_in_version, `${path}.fixed_in_version`) ?? null,
        severity: severityOf(vulnerability.normalized_severity),
      };
    });
  });
}

/**
 * `snyk container test --json` (or --json-file-output): an object with vulnerabilities[], with
 * the image's application results under applications[] (snyk/cli#3417), or an array of such
 * objects (several projects, snyk/cli#2469). packageName is the source package snyk groups by;
 * license issues are not vulnerabilities and are left out.
 */
function snykFindings(report: unknown): Finding[] {
  return Array.isArray(report)
    ? report.flatMap((result: unknown, r) => snykResult(result, `[${r}]`))
    : snykResult(report, '');
}

function snykResult(value: unknown, at: string): Finding[] {
  const result = objectAt(value, at === '' ? 'the report' : at);
  const field = (name: string): string => (at === '' ? name : `${at}.${name}`);
  if (!Array.isArray(result.vulnerabilities)) {
    if (typeof result.error === 'string') {
      throw new Unusable(`snyk reported an error: ${clip(result.error)}`);
    }
    throw new Unusable(`${field('vulnerabilities')} is missing: not snyk container test JSON`);
  }
  const own = result.vulnerabilities.flatMap((entry: unknown, v) => {
    const path = `${field('vulnerabilities')}[${v}]`;
    const vulnerability = objectAt(entry, path);
    if (vulnerability.type === 'license') return [];
    return [
      {
        id: textAt(vulnerability.id, `${path}.id`),
        package:
          optionalText(vulnerability.packageName, `${path}.packageName`) ??
          textAt(vulnerability.name, `${path}.name`),
        version: optionalText(vulnerability.version, `${path}.version`) ?? '',
        fixed_version:
          joinVersions(listAt(vulnerability.fixedIn, `${path}.fixedIn`), `${path}.fixedIn`) ??
          optionalText(vulnerability.nearestFixedInVersion, `${path}.nearestFixedInVersion`) ??
          null,
        severity: severityOf(vulnerability.severity),
      },
    ];
  });
  const applications = listAt(result.applications, field('applications')).flatMap(
    (application: unknown, a) => snykResult(application, `${field('applications')}[${a}]`),
  );
  return [...own, ...applications];
}

/** One finding per id, package and version: the most severe severity, the first fixed version. */
function deduplicate(findings: readonly Finding[]): Finding[] {
  const byKey = new Map<string, Finding>();
  for (const finding of findings) {
    const key = JSON.stringify([finding.id, finding.package, finding.version]);
    const seen = byKey.get(key);
    byKey.set(
      key,
      seen === undefined
        ? finding
        : {
            ...seen,
            severity: isAtLeast(seen.severity, finding.severity) ? seen.severity : finding.severity,
            fixed_version: seen.fixed_version ?? finding.fixed_version,
          },
    );
  }
  return [...byKey.values()];
}

function objectAt(value: unknown, path: string): Json {
  if (!isPlainObject(value)) throw new Unusable(`${path} must be an object`);
  return value;
}

/** An optional list: absent or null is empty. */
function listAt(value: unknown, path: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new Unusable(`${path} must be an array`);
  return value;
}

/** An optional map keyed by id: absent or null is empty. */
function mapAt(value: unknown, path: string): Json {
  if (value === undefined || value === null) return {};
  return objectAt(value, path);
}

/** A map's own entry (never an inherited property such as "constructor"). */
function entryOf(map: Json, key: string, from: string, mapName: string): unknown {
  if (!Object.hasOwn(map, key)) throw new Unusable(`${from} names ${key}, which ${mapName} lacks`);
  return map[key];
}

/** A required, non-empty string. */
function textAt(value: unknown, path: string): string {
  const text = optionalText(value, path);
  if (text === undefined) throw new Unusable(`${path} is missing`);
  return text;
}

/** An optional string: absent, null and "" are undefined. */
function optionalText(value: unknown, path: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new Unusable(`${path} must be a string`);
  return value;
}

/** Non-empty versions joined with ", ", or null when there are none. */
function joinVersions(values: readonly unknown[], path: string): string | null {
  const versions = values
    .map((value, i) => optionalText(value, `${path}[${i}]`))
    .filter((version) => version !== undefined);
  return versions.length === 0 ? null : versions.join(', ');
}

function clip(text: string, max = 200): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
