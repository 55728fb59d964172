import fc from 'fast-check';
import {
  type ImageReference,
  ImageReferenceError,
  ociPathProblem,
  repositoryProblem,
  splitImageReference,
} from './naming.js';
import type { OciRegistryType } from './registry.js';

const digest = `sha256:${'a'.repeat(64)}`;

/** Cases from distribution/reference normalize_test.go and reference_test.go, and kiln's own. */
const references: [reference: string, expected: ImageReference][] = [
  ['ubuntu', { host: 'docker.io', path: 'library/ubuntu' }],
  ['ubuntu:22.04', { host: 'docker.io', path: 'library/ubuntu', tag: '22.04' }],
  ['docker.io/ubuntu', { host: 'docker.io', path: 'library/ubuntu' }],
  ['index.docker.io/ubuntu', { host: 'docker.io', path: 'library/ubuntu' }],
  ['team/app', { host: 'docker.io', path: 'team/app' }],
  ['team/app/web', { host: 'docker.io', path: 'team/app/web' }],
  ['localhost/app', { host: 'localhost', path: 'app' }],
  ['localhost:5000/app:v1', { host: 'localhost:5000', path: 'app', tag: 'v1' }],
  ['registry:5000/team/app', { host: 'registry:5000', path: 'team/app' }],
  [
    'harbor.example.com/team/app:1.2.3',
    { host: 'harbor.example.com', path: 'team/app', tag: '1.2.3' },
  ],
  ['Example.com/app', { host: 'Example.com', path: 'app' }],
  ['Registry/app', { host: 'Registry', path: 'app' }],
  ['127.0.0.1:5000/a/b', { host: '127.0.0.1:5000', path: 'a/b' }],
  ['[::1]:5000/app', { host: '[::1]:5000', path: 'app' }],
  [`quay.io/org/app@${digest}`, { host: 'quay.io', path: 'org/app', digest }],
  [`quay.io/org/app:v2@${digest}`, { host: 'quay.io', path: 'org/app', tag: 'v2', digest }],
  ['a.b/c__d/e--f/g.h_i', { host: 'a.b', path: 'c__d/e--f/g.h_i' }],
  // Docker reads a bare "host:port" as an image and a tag (the FIXME in splitDockerDomain).
  ['localhost:5000', { host: 'docker.io', path: 'library/localhost', tag: '5000' }],
];

const badReferences: [reference: string, problem: RegExp][] = [
  ['', /empty/],
  ['a'.repeat(64), /image ID/],
  ['example.com/Team/app', /uppercase/],
  ['Team', /uppercase/],
  ['example.com/team//app', /empty '\/'-separated part/],
  ['example.com/team/app/', /empty '\/'-separated part/],
  ['example.com/-app', /"-app" in "-app" is not a valid path part/],
  ['example.com/app:-x', /tag "-x"/],
  [`example.com/app:${'t'.repeat(129)}`, /tag/],
  ['example.com/app@sha256:abc', /not a digest/],
  ['exa_mple.com/app', /"exa_mple.com" is not a host/],
  ['-example.com/app', /is not a host/],
];

describe(splitImageReference.name, () => {
  it.each(references)('splits %s', (reference, expected) => {
    expect(splitImageReference(reference)).toEqual(expected);
  });

  it.each(badReferences)('rejects "%s"', (reference, problem) => {
    let error: unknown;
    try {
      splitImageReference(reference);
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(ImageReferenceError);
    expect((error as Error).message).toMatch(problem);
  });

  it('gives back the parts it was given for any valid host, path and tag', () => {
    const component = fc.stringMatching(/^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/);
    const path = fc
      .array(component, { minLength: 2, maxLength: 4 })
      .map((parts) => parts.join('/'))
      .filter((joined) => joined.length <= 255);
    const host = fc.constantFrom('harbor.example.com', 'localhost:5000', '10.0.0.1', 'quay.io');
    const tag = fc.option(fc.stringMatching(/^[\w][\w.-]{0,127}$/), { nil: undefined });
    fc.assert(
      fc.property(host, path, tag, (h, p, t) => {
        const text = `${h}/${p}${t === undefined ? '' : `:${t}`}`;
        expect(splitImageReference(text)).toEqual({ host: h, path: p, ...(t ? { tag: t } : {}) });
      }),
    );
  });
});

describe(ociPathProblem.name, () => {
  it.each(['a', 'a/b', 'a-b', 'a--b', 'a__b', 'a.b', 'a_b', '0/1/2'])('accepts "%s"', (path) => {
    expect(ociPathProblem(path)).toBeUndefined();
  });

  it('accepts 255 characters and no more', () => {
    expect(ociPathProblem('a'.repeat(255))).toBeUndefined();
    expect(ociPathProblem('a'.repeat(256))).toMatch(/longer than 255/);
  });

  it.each([
    ['', /empty/],
    ['A/b', /uppercase/],
    ['a/b:1', /tag or digest/],
    ['a/b@sha256:00', /tag or digest/],
    ['a//b', /empty/],
    ['/a', /empty/],
    ['a___b', /not a valid path part/],
    ['a..b', /not a valid path part/],
    ['a.-b', /not a valid path part/],
    ['_a', /not a valid path part/],
    ['a-', /not a valid path part/],
    ['a b', /not a valid path part/],
  ])('rejects "%s"', (path, problem) => {
    expect(ociPathProblem(path)).toMatch(problem);
  });
});

describe(repositoryProblem.name, () => {
  const accepted: [OciRegistryType, string][] = [
    ['harbor', 'team/app'],
    ['harbor', 'team/app/web'],
    ['harbor', 'my.team_1/app'],
    ['harbor', 't/app'],
    ['quay', 'org/app'],
    ['quay', 'org/team/app'],
    ['quay', 'my_org/app'],
    ['artifactory', 'docker-local/app'],
    ['artifactory', 'docker-local/team/app'],
  ];

  const rejected: [OciRegistryType, string, string][] = [
    ['harbor', 'app', 'Harbor repositories are <project>/<name>: "app" has no project'],
    [
      'harbor',
      'my--team/app',
      `Harbor project "my--team" is not a valid project name: use lowercase letters and digits, joined by a single '.', '_' or '-'`,
    ],
    [
      'harbor',
      'my__team/app',
      `Harbor project "my__team" is not a valid project name: use lowercase letters and digits, joined by a single '.', '_' or '-'`,
    ],
    ['harbor', 'Team/app', '"Team/app" has uppercase letters: use lowercase'],
    [
      'quay',
      'app',
      'Quay repositories are <namespace>/<name>: "app" has no organization or user namespace',
    ],
    ['quay', 'o/app', 'Quay namespace "o" is too short: namespaces have at least 2 characters'],
    [
      'quay',
      'my--org/app',
      `Quay namespace "my--org" is not a valid organization or user name: use lowercase letters and digits, joined by a single '.', '_' or '-'`,
    ],
    [
      'artifactory',
      'app',
      'Artifactory repositories are <repository-key>/<image>: "app" has no image name after the repository key',
    ],
    [
      'artifactory',
      'docker_local/app',
      `Artifactory Docker repository key "docker_local" has '_', which Docker repository keys may not contain`,
    ],
    [
      'artifactory',
      'docker-cache/app',
      'Artifactory repository key "docker-cache" ends in "-cache", which Artifactory reserves',
    ],
    [
      'artifactory',
      'jfrog-logs/app',
      'Artifactory repository key "jfrog-logs" is reserved by Artifactory',
    ],
    [
      'artifactory',
      'jfrog-system-reserved-x/app',
      'Artifactory repository key "jfrog-system-reserved-x" is reserved by Artifactory',
    ],
    [
      'artifactory',
      'docker-local/app:1',
      '"docker-local/app:1" has a tag or digest in it: give the repository path only',
    ],
  ];

  it.each(accepted)('lets %s take "%s"', (registry, path) => {
    expect(repositoryProblem(registry, path)).toBeUndefined();
  });

  it.each(rejected)('tells why %s would not take "%s"', (registry, path, problem) => {
    expect(repositoryProblem(registry, path)).toBe(problem);
  });

  it('lets Artifactory take a Docker repository key of 63 characters and no more', () => {
    expect(repositoryProblem('artifactory', `${'k'.repeat(63)}/app`)).toBeUndefined();
    expect(repositoryProblem('artifactory', `${'k'.repeat(64)}/app`)).toBe(
      `Artifactory Docker repository key "${'k'.repeat(64)}" is longer than 63 characters`,
    );
  });
});
