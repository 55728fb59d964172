import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { normalizeFindings, readStoredFindings, summarize } from './findings.js';
import { SCAN_COMMANDS, type Scanner } from '../manifest/tool-commands.js';
import { type Finding, SEVERITIES, type Severity } from '../manifest/severities.js';
import {
  CLAIR_URL_PLACEHOLDER,
  IMAGE_PLACEHOLDER,
  OUTPUT_PLACEHOLDER,
} from '../manifest/tool-commands.js';

function fixture(name: string): string {
  return readFileSync(join(__dirname, 'fixtures', name), 'utf8');
}

function finding(
  id: string,
  pkg: string,
  version: string,
  fixed_version: string | null,
  severity: Severity,
): Finding {
  return { id, package: pkg, version, fixed_version, severity };
}

function findingsOf(tool: Scanner, text: string): Finding[] {
  const result = normalizeFindings(tool, text);
  if ('problem' in result) throw new Error(`unexpected problem: ${result.problem}`);
  return result.findings;
}

function problemOf(tool: Scanner, text: string): string {
  const result = normalizeFindings(tool, text);
  if ('findings' in result) throw new Error('expected a problem, got findings');
  return result.problem;
}

/** A one-finding report in each scanner's shape, with the severity field set to `severity`. */
const ONE_FINDING: Record<Scanner, (severity: unknown) => unknown> = {
  trivy: (severity) => ({
    SchemaVersion: 2,
    Results: [
      {
        Target: 'app (alpine 3.20.0)',
        Vulnerabilities: [
          {
            VulnerabilityID: 'CVE-2024-0001',
            PkgName: 'musl',
            InstalledVersion: '1.2.5-r0',
            Severity: severity,
          },
        ],
      },
    ],
  }),
  grype: (severity) => ({
    matches: [
      {
        vulnerability: { id: 'CVE-2024-0001', severity, fix: { versions: [], state: 'not-fixed' } },
        artifact: { name: 'musl', version: '1.2.5-r0' },
      },
    ],
  }),
  clair: (severity) => ({
    manifest_hash: 'sha256:0d',
    packages: { '4': { id: '4', name: 'musl', version: '1.2.5-r0' } },
    vulnerabilities: {
      '90': {
        id: '90',
        name: 'CVE-2024-0001',
        severity: 'whatever',
        normalized_severity: severity,
      },
    },
    package_vulnerabilities: { '4': ['90'] },
  }),
  snyk: (severity) => ({
    vulnerabilities: [{ id: 'CVE-2024-0001', packageName: 'musl', version: '1.2.5-r0', severity }],
    ok: false,
  }),
};

describe(normalizeFindings.name, () => {
  it.each([
    [
      'trivy',
      'trivy-debian-buster.json',
      [
        finding('CVE-2019-18224', 'libidn2-0', '2.0.5-1', '2.0.5-1+deb10u1', 'critical'),
        finding('CVE-2019-18276', 'bash', '5.0-4', null, 'low'),
      ],
    ],
    [
      'trivy',
      'trivy-alpine-310.json',
      [
        finding('CVE-2019-1549', 'libcrypto1.1', '1.1.1c-r0', '1.1.1d-r0', 'medium'),
        finding('CVE-2019-1549', 'libssl1.1', '1.1.1c-r0', '1.1.1d-r0', 'medium'),
        finding('CVE-2019-1551', 'libcrypto1.1', '1.1.1c-r0', '1.1.1d-r2', 'medium'),
        finding('CVE-2019-1551', 'libssl1.1', '1.1.1c-r0', '1.1.1d-r2', 'medium'),
      ],
    ],
    ['trivy', 'trivy-clean.json', []],
    [
      'grype',
      'grype-image.json',
      [
        finding('CVE-1999-0002', 'package-2', '2.2.2', null, 'critical'),
        finding('CVE-1999-0001', 'package-1', '1.1.1', '1.2.1, 2.1.3, 3.4.0', 'low'),
        finding('CVE-2011-3374', 'apt', '2.6.1', null, 'negligible'),
      ],
    ],
    ['grype', 'grype-empty.json', []],
    [
      'clair',
      'clair-report.json',
      [
        finding(
          'CVE-2018-25032',
          'zlib1g',
          '1:1.2.11.dfsg-0ubuntu2',
          '1:1.2.11.dfsg-0ubuntu2.1',
          'medium',
        ),
        finding('CVE-2020-27350', 'libapt-pkg5.0', '1.6.11', '1.6.12ubuntu0.2', 'medium'),
        finding('CVE-2009-5155', 'libc6', '2.27-3ubuntu1', '2.28-0ubuntu1', 'low'),
        finding('CVE-2016-10228', 'libc6', '2.27-3ubuntu1', null, 'negligible'),
      ],
    ],
    ['clair', 'clair-empty.json', []],
    [
      'snyk',
      'snyk-container.json',
      [
        finding(
          'SNYK-UBUNTU1804-APT-1050039',
          'apt',
          '1.6.12ubuntu0.1',
          '1.6.12ubuntu0.2',
          'medium',
        ),
        finding('SNYK-UBUNTU1804-BASH-542613', 'bash', '4.4.18-2ubuntu1.2', null, 'low'),
        finding('SNYK-UBUNTU1804-TAR-559435', 'tar', '1.29b-2ubuntu0.1', '1.29b-2ubuntu0.2', 'low'),
      ],
    ],
    [
      'snyk',
      'snyk-container-apps.json',
      [
        finding(
          'SNYK-ALPINE312-APKTOOLS-1533753',
          'apk-tools',
          '2.10.6-r0',
          '2.10.7-r0',
          'critical',
        ),
        finding('SNYK-JS-LODASH-567746', 'lodash', '4.17.15', '4.17.16', 'high'),
      ],
    ],
    ['snyk', 'snyk-clean.json', []],
  ] as const)('reads %s output %s', (tool, file, expected) => {
    expect(findingsOf(tool, fixture(file))).toEqual(expected);
  });

  it('reads snyk output for several projects (a JSON array of results)', () => {
    const text = `[${fixture('snyk-container.json')},${fixture('snyk-container-apps.json')}]`;
    expect(findingsOf('snyk', text).map((f) => f.id)).toEqual([
      'SNYK-ALPINE312-APKTOOLS-1533753',
      'SNYK-JS-LODASH-567746',
      'SNYK-UBUNTU1804-APT-1050039',
      'SNYK-UBUNTU1804-BASH-542613',
      'SNYK-UBUNTU1804-TAR-559435',
    ]);
  });

  it.each([
    ['trivy', 'CRITICAL', 'critical'],
    ['trivy', 'HIGH', 'high'],
    ['trivy', 'MEDIUM', 'medium'],
    ['trivy', 'LOW', 'low'],
    ['trivy', 'UNKNOWN', 'unknown'],
    ['grype', 'Critical', 'critical'],
    ['grype', 'High', 'high'],
    ['grype', 'Medium', 'medium'],
    ['grype', 'Low', 'low'],
    ['grype', 'Negligible', 'negligible'],
    ['grype', 'Unknown', 'unknown'],
    ['clair', 'Defcon1', 'critical'],
    ['clair', 'Critical', 'critical'],
    ['clair', 'High', 'high'],
    ['clair', 'Medium', 'medium'],
    ['clair', 'Low', 'low'],
    ['clair', 'Negligible', 'negligible'],
    ['clair', 'Unknown', 'unknown'],
    ['snyk', 'critical', 'critical'],
    ['snyk', 'high', 'high'],
    ['snyk', 'medium', 'medium'],
    ['snyk', 'low', 'low'],
  ] as const)('maps %s severity %s to %s', (tool, word, expected) => {
    const [only] = findingsOf(tool, JSON.stringify(ONE_FINDING[tool](word)));
    expect(only?.severity).toBe(expected);
  });

  it.each(['trivy', 'grype', 'clair', 'snyk'] as const)(
    'makes a missing or unrecognised %s severity unknown',
    (tool) => {
      for (const severity of [undefined, null, 'Important', 7]) {
        const [only] = findingsOf(tool, JSON.stringify(ONE_FINDING[tool](severity)));
        expect(only?.severity).toBe('unknown');
      }
    },
  );

  it('takes the normalised Clair severity, not the one copied from the source', () => {
    const report = {
      manifest_hash: 'sha256:0d',
      packages: { '7': { id: '7', name: 'openssl-libs', version: '1:1.1.1k-4.el8' } },
      vulnerabilities: {
        '55': {
          id: '55',
          name: 'RHSA-2021:4613: openssl security update (Important)',
          severity: 'Important',
          normalized_severity: 'High',
          fixed_in_version: '1:1.1.1k-5.el8_5',
        },
      },
      package_vulnerabilities: { '7': ['55'] },
    };
    expect(findingsOf('clair', JSON.stringify(report))).toEqual([
      finding(
        'RHSA-2021:4613: openssl security update (Important)',
        'openssl-libs',
        '1:1.1.1k-4.el8',
        '1:1.1.1k-5.el8_5',
        'high',
      ),
    ]);
  });

  it('merges duplicates of one id, package and version: most severe, first fixed version', () => {
    const report = {
      SchemaVersion: 2,
      Results: [
        {
          Target: 'app/lib/a.jar',
          Vulnerabilities: [
            {
              VulnerabilityID: 'CVE-2021-44228',
              PkgName: 'org.apache.logging.log4j:log4j-core',
              InstalledVersion: '2.14.1',
              Severity: 'HIGH',
            },
          ],
        },
        {
          Target: 'app/lib/b.jar',
          Vulnerabilities: [
            {
              VulnerabilityID: 'CVE-2021-44228',
              PkgName: 'org.apache.logging.log4j:log4j-core',
              InstalledVersion: '2.14.1',
              FixedVersion: '2.15.0',
              Severity: 'CRITICAL',
            },
            {
              VulnerabilityID: 'CVE-2021-44228',
              PkgName: 'org.apache.logging.log4j:log4j-core',
              InstalledVersion: '2.16.0',
              FixedVersion: '2.17.0',
              Severity: 'CRITICAL',
            },
          ],
        },
      ],
    };
    expect(findingsOf('trivy', JSON.stringify(report))).toEqual([
      finding(
        'CVE-2021-44228',
        'org.apache.logging.log4j:log4j-core',
        '2.14.1',
        '2.15.0',
        'critical',
      ),
      finding(
        'CVE-2021-44228',
        'org.apache.logging.log4j:log4j-core',
        '2.16.0',
        '2.17.0',
        'critical',
      ),
    ]);
  });

  it('prefers snyk fixedIn, falls back to nearestFixedInVersion, and skips license issues', () => {
    const report = {
      vulnerabilities: [
        {
          id: 'SNYK-A-1',
          packageName: 'a',
          version: '1',
          severity: 'low',
          fixedIn: ['1.1', '2.0'],
          nearestFixedInVersion: '1.1',
        },
        {
          id: 'SNYK-B-1',
          packageName: 'b',
          version: '1',
          severity: 'low',
          fixedIn: [''],
          nearestFixedInVersion: '1.4',
        },
        {
          id: 'snyk:lic:npm:c:GPL-3.0',
          type: 'license',
          packageName: 'c',
          version: '1',
          severity: 'high',
        },
      ],
      ok: false,
    };
    expect(findingsOf('snyk', JSON.stringify(report))).toEqual([
      finding('SNYK-A-1', 'a', '1', '1.1, 2.0', 'low'),
      finding('SNYK-B-1', 'b', '1', '1.4', 'low'),
    ]);
  });

  it('makes a missing version "" and a missing fixed version null', () => {
    const report = {
      SchemaVersion: 2,
      Results: [
        {
          Target: 't',
          Vulnerabilities: [{ VulnerabilityID: 'CVE-2024-2', PkgName: 'p', Severity: 'LOW' }],
        },
      ],
    };
    expect(findingsOf('trivy', JSON.stringify(report))).toEqual([
      finding('CVE-2024-2', 'p', '', null, 'low'),
    ]);
  });

  it.each([
    ['empty output', 'trivy', '', 'the report is empty'],
    ['blank output', 'grype', '  \n', 'the report is empty'],
    ['truncated JSON', 'clair', '{"manifest_hash": ', 'not JSON: '],
    ["snyk's human-readable output", 'snyk', 'Testing mongo:latest...', 'not JSON: '],
    [
      "grype JSON given as trivy's",
      'trivy',
      fixture('grype-image.json'),
      'SchemaVersion is missing: not a trivy JSON report',
    ],
    [
      "trivy JSON given as grype's",
      'grype',
      fixture('trivy-debian-buster.json'),
      'matches is missing: not a grype JSON report',
    ],
    [
      "snyk JSON given as Clair's",
      'clair',
      fixture('snyk-container.json'),
      'manifest_hash is missing: not a Clair v4',
    ],
    [
      "Clair JSON given as snyk's",
      'snyk',
      fixture('clair-report.json'),
      'vulnerabilities is missing: not snyk container test JSON',
    ],
    [
      "trivy's pre-v0.20 bare list",
      'trivy',
      '[{"Target": "alpine (alpine 3.7.1)", "Vulnerabilities": null}]',
      'before v0.20',
    ],
    [
      'trivy Results that are not a list',
      'trivy',
      '{"SchemaVersion": 2, "Results": {}}',
      'Results must be an array',
    ],
    [
      'a trivy entry without an id',
      'trivy',
      '{"SchemaVersion": 2, "Results": [{"Target": "t", "Vulnerabilities": [{"VulnerabilityID": "CVE-1", "PkgName": "p"}, {"PkgName": "q"}]}]}',
      'Results[0].Vulnerabilities[1].VulnerabilityID is missing',
    ],
    [
      'a trivy FixedVersion that is not a string',
      'trivy',
      '{"SchemaVersion": 2, "Results": [{"Target": "t", "Vulnerabilities": [{"VulnerabilityID": "CVE-1", "PkgName": "p", "FixedVersion": 2}]}]}',
      'Results[0].Vulnerabilities[0].FixedVersion must be a string',
    ],
    [
      'a grype match without an artifact',
      'grype',
      '{"matches": [{"vulnerability": {"id": "CVE-1"}}]}',
      'matches[0].artifact must be an object',
    ],
    [
      'grype fix versions that are not a list',
      'grype',
      '{"matches": [{"vulnerability": {"id": "CVE-1", "fix": {"versions": "1.0"}}, "artifact": {"name": "p"}}]}',
      'matches[0].vulnerability.fix.versions must be an array',
    ],
    ["clairctl's null (no report)", 'clair', 'null', 'clairctl printed null'],
    [
      'a Clair link to a package the report lacks',
      'clair',
      '{"manifest_hash": "sha256:0", "packages": {}, "vulnerabilities": {"9": {"name": "CVE-1"}}, "package_vulnerabilities": {"4": ["9"]}}',
      'package_vulnerabilities.4 names 4, which packages lacks',
    ],
    [
      'a Clair link to an inherited property name',
      'clair',
      '{"manifest_hash": "sha256:0", "packages": {"4": {"name": "p"}}, "vulnerabilities": {}, "package_vulnerabilities": {"4": ["constructor"]}}',
      'package_vulnerabilities.4 names constructor, which vulnerabilities lacks',
    ],
    [
      "snyk's error object",
      'snyk',
      fixture('snyk-error.json'),
      'snyk reported an error: Failed to get docker image',
    ],
    [
      'a snyk result list with a non-object',
      'snyk',
      '[{"vulnerabilities": []}, 3]',
      '[1] must be an object',
    ],
    [
      'a snyk application entry without an id',
      'snyk',
      '{"vulnerabilities": [], "applications": [{"vulnerabilities": [{"packageName": "lodash"}]}]}',
      'applications[0].vulnerabilities[0].id is missing',
    ],
  ] as const)('refuses %s', (_label, tool, text, problem) => {
    expect(problemOf(tool, text)).toContain(problem);
  });
});

describe(summarize.name, () => {
  it('counts every severity, zero included, in severity order', () => {
    const counts = summarize(findingsOf('clair', fixture('clair-report.json')));
    expect(Object.keys(counts)).toEqual([...SEVERITIES]);
    expect(counts).toEqual({ critical: 0, high: 0, medium: 2, low: 1, negligible: 1, unknown: 0 });
  });
});

describe(readStoredFindings.name, () => {
  it('reads back what kiln stores for a report', () => {
    const findings = findingsOf('trivy', fixture('trivy-debian-buster.json'));
    expect(readStoredFindings(JSON.stringify(findings))).toEqual(findings);
  });

  it('keeps only the fields of a finding', () => {
    const stored = [{ ...finding('CVE-2024-1', 'musl', '1.2', null, 'low'), extra: [1] }];
    expect(readStoredFindings(JSON.stringify(stored))).toEqual([
      finding('CVE-2024-1', 'musl', '1.2', null, 'low'),
    ]);
  });

  it.each([
    ['text that is not JSON', '[{"id":'],
    ['an object', '{"id":"CVE-2024-1"}'],
    ['null', 'null'],
    ['a list holding a number', '[1]'],
    [
      'a finding without a package',
      '[{"id":"a","version":"1","fixed_version":null,"severity":"low"}]',
    ],
    [
      'a numeric version',
      '[{"id":"a","package":"p","version":1,"fixed_version":null,"severity":"low"}]',
    ],
    ['a missing fixed_version', '[{"id":"a","package":"p","version":"1","severity":"low"}]'],
    [
      'a severity kiln does not write',
      '[{"id":"a","package":"p","version":"1","fixed_version":null,"severity":"HIGH"}]',
    ],
  ])('finds no findings in %s', (_label, text) => {
    expect(readStoredFindings(text)).toBeUndefined();
  });
});

describe('SCAN_COMMANDS', () => {
  it.each(Object.entries(SCAN_COMMANDS))(
    '%s takes the image as the end of one argument and writes where the step reads',
    (_tool, command) => {
      const withImage = command.argv.filter((arg) => arg.includes(IMAGE_PLACEHOLDER));
      expect(withImage).toHaveLength(1);
      expect(withImage[0]?.endsWith(IMAGE_PLACEHOLDER)).toBe(true);
      const withOutput = command.argv.filter((arg) => arg.includes(OUTPUT_PLACEHOLDER));
      expect(withOutput).toHaveLength(command.stdout ? 0 : 1);
      expect(command.okExitCodes).toContain(0);
    },
  );

  it('gives clairctl its host as a flag of the report subcommand', () => {
    const { argv } = SCAN_COMMANDS.clair;
    expect(argv.indexOf('--host')).toBeGreaterThan(argv.indexOf('report'));
    expect(argv[argv.indexOf('--host') + 1]).toBe(CLAIR_URL_PLACEHOLDER);
  });

  it('treats snyk exit code 1 (vulnerabilities found) as a complete report', () => {
    expect(SCAN_COMMANDS.snyk.okExitCodes).toEqual([0, 1]);
  });
});
