import { METHOD_NAMES } from '../manifest/types.js';
import { BUILD_METHODS } from './methods.js';
import {
  buildNamespacesOf,
  levelOfNamespace,
  namespaceOfMethod,
  type NamespacesByLevel,
  oneNamespace,
  placementProblem,
} from './namespaces.js';

/** The chart's shape: a namespace per level, buildx on. */
const BY_LEVEL: NamespacesByLevel = {
  restricted: 'kiln-builds-restricted',
  baseline: 'kiln-builds',
  privileged: 'kiln-builds-privileged',
};
/** buildx off: no namespace admits privileged pods. */
const NO_PRIVILEGED: NamespacesByLevel = { ...BY_LEVEL, privileged: undefined };

describe('build namespaces by Pod Security level', () => {
  it('gives each method the level its file documents', () => {
    expect(
      Object.fromEntries(METHOD_NAMES.map((m) => [m, BUILD_METHODS[m].podSecurityLevel])),
    ).toEqual({
      kaniko: 'baseline',
      buildx: 'privileged',
      container: 'baseline',
      paketo: 'restricted',
      packer: 'restricted',
    });
  });

  it("writes each method's builds to its level's namespace", () => {
    expect(
      Object.fromEntries(METHOD_NAMES.map((m) => [m, namespaceOfMethod(BY_LEVEL, m)])),
    ).toEqual({
      kaniko: 'kiln-builds',
      buildx: 'kiln-builds-privileged',
      container: 'kiln-builds',
      paketo: 'kiln-builds-restricted',
      packer: 'kiln-builds-restricted',
    });
    expect(namespaceOfMethod(NO_PRIVILEGED, 'buildx')).toBeUndefined();
  });

  it('watches every distinct namespace once, stricter levels first', () => {
    expect(buildNamespacesOf(BY_LEVEL)).toEqual([
      'kiln-builds-restricted',
      'kiln-builds',
      'kiln-builds-privileged',
    ]);
    expect(buildNamespacesOf(NO_PRIVILEGED)).toEqual(['kiln-builds-restricted', 'kiln-builds']);
    expect(buildNamespacesOf(oneNamespace('kiln-builds'))).toEqual(['kiln-builds']);
  });

  it('takes the most permissive level of the levels sharing a namespace', () => {
    const shared = { restricted: 'a', baseline: 'a', privileged: 'b' };
    expect(levelOfNamespace(shared, 'a')).toBe('baseline');
    expect(levelOfNamespace(shared, 'b')).toBe('privileged');
    expect(levelOfNamespace(shared, 'c')).toBeUndefined();
  });

  it('lets every method run anywhere when every level is one namespace, as before', () => {
    for (const method of METHOD_NAMES)
      expect(placementProblem(oneNamespace('kiln-builds'), 'kiln-builds', method)).toBeUndefined();
  });

  it.each([
    ['paketo', 'kiln-builds-restricted'],
    ['paketo', 'kiln-builds'],
    ['paketo', 'kiln-builds-privileged'],
    ['kaniko', 'kiln-builds'],
    ['kaniko', 'kiln-builds-privileged'],
    ['buildx', 'kiln-builds-privileged'],
  ] as const)('lets %s run in %s (its level admits it)', (method, namespace) => {
    expect(placementProblem(BY_LEVEL, namespace, method)).toBeUndefined();
  });

  it.each([
    [
      'kaniko',
      'kiln-builds-restricted',
      'kaniko builds need Pod Security "baseline" pods and belong in namespace kiln-builds; namespace kiln-builds-restricted admits Pod Security "restricted" pods at most',
    ],
    [
      'container',
      'kiln-builds-restricted',
      'container builds need Pod Security "baseline" pods and belong in namespace kiln-builds; namespace kiln-builds-restricted admits Pod Security "restricted" pods at most',
    ],
    [
      'buildx',
      'kiln-builds',
      'buildx builds need Pod Security "privileged" pods and belong in namespace kiln-builds-privileged; namespace kiln-builds admits Pod Security "baseline" pods at most',
    ],
    [
      'paketo',
      'elsewhere',
      'paketo builds need Pod Security "restricted" pods and belong in namespace kiln-builds-restricted; namespace elsewhere is not a build namespace of this kiln',
    ],
  ] as const)('refuses %s in %s, naming where it belongs', (method, namespace, problem) => {
    expect(placementProblem(BY_LEVEL, namespace, method)).toBe(problem);
  });

  it('refuses buildx everywhere when no namespace admits privileged pods, saying how to enable it', () => {
    expect(placementProblem(NO_PRIVILEGED, 'kiln-builds', 'buildx')).toBe(
      'buildx builds need Pod Security "privileged" pods, which no build namespace of this kiln admits (an administrator enables them: KILN_BUILD_ALLOW_PRIVILEGED, the chart\'s builds.buildx.enabled)',
    );
  });
});
