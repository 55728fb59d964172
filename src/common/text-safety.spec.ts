import { NUL_PROBLEM, SURROGATE_PROBLEM, textProblem, unstorableText } from './text-safety.js';

describe(textProblem.name, () => {
  it.each([
    ['plain text', 'main', undefined],
    ['a surrogate pair (emoji)', 'ship 🚢 it', undefined],
    ['a NUL', 'a\u0000b', NUL_PROBLEM],
    ['a lone high surrogate at the end', 'x\ud83d', SURROGATE_PROBLEM],
    ['a lone low surrogate at the start', '\ude80x', SURROGATE_PROBLEM],
    ['two high surrogates', '\ud83d\ud83d\ude80', SURROGATE_PROBLEM],
  ])('judges %s', (_name, text, expected) => {
    expect(textProblem(text)).toBe(expected);
  });
});

describe(unstorableText.name, () => {
  it('names values by their path, array indices included', () => {
    expect(
      unstorableText({ manifest: { tags: ['ok', 'b\u0000d'], metadata: { x: { y: '\udc00' } } } }),
    ).toEqual({
      'manifest.tags.1': NUL_PROBLEM,
      'manifest.metadata.x.y': SURROGATE_PROBLEM,
    });
  });

  it('names a bad key by its path with the bad characters escaped', () => {
    expect(unstorableText({ build_args: { 'A\u0000B': 'v', '\ud800': 'w' } })).toEqual({
      'build_args.A\\u0000B': NUL_PROBLEM,
      'build_args.\\ud800': SURROGATE_PROBLEM,
    });
  });

  it('names a bad root value by the root name', () => {
    expect(unstorableText('\u0000', 'query')).toEqual({ query: NUL_PROBLEM });
  });

  it('finds nothing in clean values, numbers, booleans and null', () => {
    expect(unstorableText({ a: [1, true, null, { b: 'ü' }], c: undefined })).toEqual({});
    expect(unstorableText(undefined)).toEqual({});
  });

  it('lists at most 20 problems', () => {
    const many = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, '\u0000']));

    expect(Object.keys(unstorableText(many))).toHaveLength(20);
  });

  it('walks values nested far deeper than the call stack allows', () => {
    let deep: unknown = 'x\u0000';
    for (let i = 0; i < 100_000; i++) deep = [deep];

    expect(Object.values(unstorableText(deep))).toEqual([NUL_PROBLEM]);
  });
});
