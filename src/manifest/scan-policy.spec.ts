import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { normalizeFindings } from '../artifacts/findings.js';
import { type Finding, type Severity } from './severities.js';
import { evaluatePolicy, readScanPolicy } from './scan-policy.js';
import { type ScanPolicy } from './types.js';

const PATH = 'manifest.build_config.scan_policy';

function read(value: unknown): { policy: ScanPolicy | undefined; details: Record<string, string> } {
  const details: Record<string, string> = {};
  return { policy: readScanPolicy(value, PATH, details), details };
}

function finding(id: string, severity: Severity, pkg = 'openssl', version = '3.0.1'): Finding {
  return { id, package: pkg, version, fixed_version: null, severity };
}

/** The two findings of the trivy debian-buster fixture: CVE-2019-18224 critical, CVE-2019-18276 low. */
function debianBuster(): Finding[] {
  const text = readFileSync(
    join(__dirname, '..', 'artifacts', 'fixtures', 'trivy-debian-buster.json'),
    'utf8',
  );
  const result = normalizeFindings('trivy', text);
  if ('problem' in result) throw new Error(result.problem);
  return result.findings;
}

describe(readScanPolicy.name, () => {
  it.each([undefined, null])('reads %s as no policy, with no problem', (value) => {
    expect(read(value)).toEqual({ policy: undefined, details: {} });
  });

  it('reads fail_on and trimmed ignore ids', () => {
    expect(read({ fail_on: 'high', ignore: [' CVE-2024-1 ', 'GHSA-jfh8-c2jp-5v3q'] })).toEqual({
      policy: { fail_on: 'high', ignore: ['CVE-2024-1', 'GHSA-jfh8-c2jp-5v3q'] },
      details: {},
    });
  });

  it('reads an empty object and a null fail_on as a policy that sets nothing', () => {
    expect(read({})).toEqual({ policy: {}, details: {} });
    expect(read({ fail_on: null, ignore: null })).toEqual({ policy: {}, details: {} });
  });

  it('keeps each id once, CVE and GHSA ids in any case, other ids exactly', () => {
    const { policy } = read({ ignore: ['CVE-2024-1', 'cve-2024-1', 'SNYK-JS-A-1', 'snyk-js-a-1'] });
    expect(policy?.ignore).toEqual(['CVE-2024-1', 'SNYK-JS-A-1', 'snyk-js-a-1']);
  });

  it('accepts 1000 ignore ids of 200 characters', () => {
    const ids = Array.from({ length: 1000 }, (_, i) => `SNYK-${String(i).padStart(195, '0')}`);
    const { policy, details } = read({ ignore: ids });
    expect(details).toEqual({});
    expect(policy?.ignore).toHaveLength(1000);
  });

  it.each([
    ['a string', 'high', { [PATH]: 'must be an object with fail_on and/or ignore' }],
    ['a list', ['high'], { [PATH]: 'must be an object with fail_on and/or ignore' }],
    [
      'an unknown key',
      { fail_on: 'high', failOn: 'high' },
      { [`${PATH}.failOn`]: 'is not allowed' },
    ],
    [
      'an unknown severity',
      { fail_on: 'severe' },
      { [`${PATH}.fail_on`]: 'must be one of: critical, high, medium, low, negligible, unknown' },
    ],
    [
      'an upper-case severity',
      { fail_on: 'HIGH' },
      { [`${PATH}.fail_on`]: 'must be one of: critical, high, medium, low, negligible, unknown' },
    ],
    [
      'a numeric severity',
      { fail_on: 3 },
      { [`${PATH}.fail_on`]: 'must be one of: critical, high, medium, low, negligible, unknown' },
    ],
    [
      'ignore as one string',
      { ignore: 'CVE-2024-1' },
      { [`${PATH}.ignore`]: 'must be an array of vulnerability ids' },
    ],
    [
      'a non-string id',
      { ignore: ['CVE-2024-1', 42] },
      { [`${PATH}.ignore.1`]: 'must be a string' },
    ],
    ['an empty id', { ignore: ['  '] }, { [`${PATH}.ignore.0`]: 'must not be empty' }],
    [
      'an id of 201 characters',
      { ignore: ['x'.repeat(201)] },
      { [`${PATH}.ignore.0`]: 'must be at most 200 characters' },
    ],
    [
      '1001 ids',
      { ignore: Array.from({ length: 1001 }, (_, i) => `CVE-2024-${i}`) },
      { [`${PATH}.ignore`]: 'must list at most 1000 ids' },
    ],
  ])('reports %s under its path', (_label, value, expected) => {
    expect(read(value).details).toEqual(expected);
  });
});

describe(evaluatePolicy.name, () => {
  const critical = finding('CVE-2019-18224', 'critical', 'libidn2-0', '2.0.5-1');

  it('never fails a build without a policy', () => {
    expect(evaluatePolicy(undefined, [critical])).toEqual({ violated: false });
  });

  it('never fails a build on an ignore list alone', () => {
    expect(evaluatePolicy({ ignore: ['CVE-2024-9'] }, [critical])).toEqual({ violated: false });
  });

  it('counts a finding exactly at fail_on', () => {
    const high = finding('CVE-2024-1', 'high');
    expect(evaluatePolicy({ fail_on: 'high' }, [high])).toMatchObject({
      violated: true,
      counted: [high],
    });
  });

  it('does not count a finding below fail_on', () => {
    expect(evaluatePolicy({ fail_on: 'high' }, [finding('CVE-2024-1', 'medium')])).toEqual({
      violated: false,
    });
  });

  it('counts unknown findings only with fail_on unknown', () => {
    const unknown = finding('CVE-2024-1', 'unknown');
    expect(evaluatePolicy({ fail_on: 'negligible' }, [unknown])).toEqual({ violated: false });
    expect(evaluatePolicy({ fail_on: 'unknown' }, [unknown])).toMatchObject({ violated: true });
  });

  it('does not count ignored findings, CVE and GHSA ids in any case', () => {
    const findings = [critical, finding('GHSA-jfh8-c2jp-5v3q', 'critical', 'log4j-core', '2.14.1')];
    expect(
      evaluatePolicy(
        { fail_on: 'low', ignore: ['cve-2019-18224', 'ghsa-JFH8-c2jp-5v3q'] },
        findings,
      ),
    ).toEqual({ violated: false });
  });

  it('matches other scanners’ ids exactly', () => {
    const snyk = finding('SNYK-UBUNTU1804-BASH-542613', 'low', 'bash', '4.4.18-2ubuntu1.2');
    expect(
      evaluatePolicy({ fail_on: 'low', ignore: ['snyk-ubuntu1804-bash-542613'] }, [snyk]),
    ).toMatchObject({ violated: true, counted: [snyk] });
    expect(
      evaluatePolicy({ fail_on: 'low', ignore: ['SNYK-UBUNTU1804-BASH-542613'] }, [snyk]),
    ).toEqual({ violated: false });
  });

  it('summarises the findings it counts, most severe first', () => {
    expect(evaluatePolicy({ fail_on: 'low' }, [...debianBuster()].reverse())).toEqual({
      violated: true,
      summary:
        'scan policy fail_on=low: 2 findings at or above low (1 critical, 1 low): ' +
        'CVE-2019-18224 (libidn2-0 2.0.5-1), CVE-2019-18276 (bash 5.0-4)',
      counted: debianBuster(),
    });
  });

  it('says "1 finding" and leaves out an empty version', () => {
    const verdict = evaluatePolicy({ fail_on: 'critical' }, [
      finding('CVE-2024-1', 'critical', 'musl', ''),
    ]);
    expect(verdict).toMatchObject({
      summary:
        'scan policy fail_on=critical: 1 finding at or above critical (1 critical): CVE-2024-1 (musl)',
    });
  });

  it('names five findings and counts the rest', () => {
    const findings = Array.from({ length: 8 }, (_, i) =>
      finding(`CVE-2024-${i + 1}`, i < 2 ? 'critical' : 'high'),
    );
    expect(evaluatePolicy({ fail_on: 'high' }, findings)).toMatchObject({
      summary:
        'scan policy fail_on=high: 8 findings at or above high (2 critical, 6 high): ' +
        'CVE-2024-1 (openssl 3.0.1), CVE-2024-2 (openssl 3.0.1), CVE-2024-3 (openssl 3.0.1), ' +
        'CVE-2024-4 (openssl 3.0.1), CVE-2024-5 (openssl 3.0.1), and 3 more',
    });
  });

  it('keeps the summary under 1000 characters however long the ids and names are', () => {
    const findings = Array.from({ length: 12_000 }, (_, i) =>
      finding(
        `RHSA-${String(i).padStart(190, '0')}`,
        (['critical', 'high', 'medium', 'low', 'negligible', 'unknown'] as const)[i % 6] ??
          'unknown',
        `lib${'x'.repeat(300)}`,
        '9'.repeat(100),
      ),
    );
    const verdict = evaluatePolicy({ fail_on: 'unknown' }, findings);
    if (!verdict.violated) throw new Error('expected a violation');
    expect(verdict.summary.length).toBeLessThan(1000);
    expect(verdict.summary).toMatch(/, and 11995 more$/);
    expect(verdict.counted).toHaveLength(12_000);
  });
});
