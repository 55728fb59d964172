import { MAX_JSON_DEPTH, nestsDeeperThan } from './json-body.js';

const bytes = (text: string) => Buffer.from(text, 'utf8');
const arrays = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

describe(nestsDeeperThan.name, () => {
  it.each([
    ['a flat object', '{"a":1,"b":[1,2]}', 2, false],
    ['exactly the limit', arrays(MAX_JSON_DEPTH), MAX_JSON_DEPTH, false],
    ['one level over the limit', arrays(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH, true],
    ['mixed objects and arrays', '{"a":[{"b":[{}]}]}', 4, true],
    ['siblings, which do not add up', '[[],[],[[]]]', 3, false],
    ['brackets inside strings', `{"a":"${'['.repeat(100)}"}`, 1, false],
    ['an escaped quote inside a string', `{"a":"\\"[[[[","b":1}`, 1, false],
    ['an escaped backslash ending a string', `{"a":"\\\\","b":[[]]}`, 2, true],
    ['brackets in multi-byte text', `{"é[💥":"ü]"}`, 1, false],
  ])('judges %s', (_name, json, max, expected) => {
    expect(nestsDeeperThan(bytes(json), max)).toBe(expected);
  });

  it('stops at the first level too deep, however long the body', () => {
    const body = Buffer.alloc(32 * 1024 * 1024, '[');
    let read = 0;
    // Counts the bytes the scan looks at.
    const counted = new Proxy(body, {
      get(target, key) {
        if (typeof key === 'string' && /^\d+$/.test(key)) read++;
        return Reflect.get(target, key) as unknown;
      },
    });

    expect(nestsDeeperThan(counted, MAX_JSON_DEPTH)).toBe(true);
    expect(read).toBe(MAX_JSON_DEPTH + 1);
  });
});
