import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, STEP_TOOL_NAMES } from '../src/config/config.js';

/*
 * docs/configuration.md is the reference of kiln's settings (issue 28 item 7): every variable
 * loadConfig reads is named there, and every variable named there is one loadConfig reads.
 */
const ROOT = join(__dirname, '..');
const SETTING = /^(?:KILN_[A-Z0-9_]+|DATABASE_URL|PORT)$/;

/** The settings loadConfig asks for, found by handing it an environment that records each read. */
function variablesRead(): string[] {
  const read = new Set<string>();
  const env = new Proxy<Record<string, string | undefined>>(
    {},
    {
      get(_target, name) {
        if (typeof name === 'string') read.add(name);
        return undefined;
      },
    },
  );
  const dir = mkdtempSync(join(tmpdir(), 'kiln-docs-config-'));
  try {
    loadConfig(env, dir, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return [...read].filter((name) => SETTING.test(name)).sort();
}

/** The settings the page names in code spans; `KILN_STEP_IMAGE_<TOOL>` stands for each tool. */
function variablesDocumented(page: string): string[] {
  const named = new Set<string>();
  for (const [, span] of page.matchAll(/`([^`\n]+)`/g)) {
    for (const [name] of span!.matchAll(/\b(?:KILN_[A-Z0-9_<>]+|DATABASE_URL|PORT)\b>?/g)) {
      if (name === 'KILN_STEP_IMAGE_<TOOL>') {
        for (const tool of STEP_TOOL_NAMES) named.add(`KILN_STEP_IMAGE_${tool.toUpperCase()}`);
      } else if (SETTING.test(name)) {
        named.add(name);
      }
    }
  }
  return [...named].sort();
}

describe('docs/configuration.md', () => {
  const page = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');

  it('names every variable kiln reads at start', () => {
    const read = variablesRead();
    expect(read.length).toBeGreaterThan(50);
    const documented = new Set(variablesDocumented(page));
    expect(read.filter((name) => !documented.has(name))).toEqual([]);
  });

  it('names no variable kiln does not read', () => {
    const read = new Set(variablesRead());
    expect(variablesDocumented(page).filter((name) => !read.has(name))).toEqual([]);
  });
});
