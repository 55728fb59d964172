import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { type PackerArtifacts, packerArtifactsOf } from '../manifest/formats.js';
import {
  manifestOutputOf,
  NO_MANIFEST_POST_PROCESSOR,
  PACKER_MESSAGE_MAX_BYTES,
  packerFromMessage,
  packerMessage,
  packerNote,
  type PackerReport,
  readPackerManifest,
} from './packer-manifest.js';
import { runStep } from './run-step.js';

/** packer 1.6.6's manifest of two runs (../manifest/fixtures/README.md). */
const FIXTURE = readFileSync(join(__dirname, '../manifest/fixtures/packer-manifest-file.json'));
const FIXTURE_ARTIFACTS = packerArtifactsOf(FIXTURE);

const json = (postProcessors: unknown[]): string =>
  JSON.stringify({
    builders: [{ type: 'null', communicator: 'none' }],
    ...{ 'post-processors': postProcessors },
  });

const hcl = (build: string): string =>
  `source "null" "a" {\n  communicator = "none"\n}\n\nbuild {\n  sources = ["source.null.a"]\n${build}}\n`;

describe(manifestOutputOf.name, () => {
  it.each<[string, string, string, unknown]>([
    [
      'a JSON template without post-processors',
      JSON.stringify({ builders: [{ type: 'null' }] }),
      'template.json',
      { kind: 'none', reason: NO_MANIFEST_POST_PROCESSOR },
    ],
    [
      'a JSON template whose post-processors write no manifest',
      json([{ type: 'shell-local', inline: ['true'] }]),
      'template.json',
      { kind: 'none', reason: NO_MANIFEST_POST_PROCESSOR },
    ],
    [
      'a JSON "manifest" by its type alone: packer’s default file',
      json(['manifest']),
      'template.json',
      { kind: 'file', output: 'packer-manifest.json' },
    ],
    [
      'a JSON manifest with its output',
      json([{ type: 'manifest', output: 'out/manifest.json', strip_path: true }]),
      'template.json',
      { kind: 'file', output: 'out/manifest.json' },
    ],
    [
      'a JSON manifest in a chain, under the template’s directory',
      json([
        [
          { type: 'shell-local', inline: ['true'] },
          { type: 'manifest', output: '{{ template_dir }}/m.json' },
        ],
      ]),
      'template.json',
      { kind: 'file', output: 'm.json' },
    ],
    [
      'JSON manifests writing two files: the first, with a note',
      json([
        { type: 'manifest', output: 'a.json' },
        { type: 'manifest', output: './a.json' },
        { type: 'manifest' },
      ]),
      'template.json',
      {
        kind: 'file',
        output: 'a.json',
        note: 'the template has 2 manifest post-processors writing different files; kiln reads a.json',
      },
    ],
    [
      'a JSON output that a template function computes',
      json([{ type: 'manifest', output: 'manifest-{{timestamp}}.json' }]),
      'template.json',
      {
        kind: 'problem',
        problem:
          'the manifest post-processor\'s output "manifest-{{timestamp}}.json" is computed when packer runs, so kiln cannot tell which file it wrote',
      },
    ],
    [
      'an HCL2 manifest block without settings',
      hcl('  post-processor "manifest" {}\n'),
      'template.pkr.hcl',
      { kind: 'file', output: 'packer-manifest.json' },
    ],
    [
      'an HCL2 manifest under path.root, in a post-processors chain',
      hcl(
        '  post-processors {\n    post-processor "manifest" {\n      output = "${path.root}/out/m.json"\n    }\n  }\n',
      ),
      'template.pkr.hcl',
      { kind: 'file', output: 'out/m.json' },
    ],
    [
      'an HCL2 output from a variable, then a literal one',
      `variable "out" {\n  type = string\n}\n${hcl(
        '  post-processor "manifest" {\n    output = var.out\n  }\n  post-processor "manifest" {\n    output = "lit.json"\n  }\n',
      )}`,
      'template.pkr.hcl',
      {
        kind: 'file',
        output: 'lit.json',
        note: 'the template has 2 manifest post-processors writing different files; kiln reads lit.json',
      },
    ],
    [
      'an HCL2 output from a variable alone',
      `variable "out" {\n  type = string\n}\n${hcl('  post-processor "manifest" {\n    output = var.out\n  }\n')}`,
      'template.pkr.hcl',
      {
        kind: 'problem',
        problem:
          'the manifest post-processor\'s output "${var.out}" is computed when packer runs, so kiln cannot tell which file it wrote',
      },
    ],
    [
      'an HCL2 template with other post-processors only',
      hcl('  post-processor "shell-local" {\n    inline = ["true"]\n  }\n'),
      'template.pkr.hcl',
      { kind: 'none', reason: NO_MANIFEST_POST_PROCESSOR },
    ],
  ])('reads %s', async (_name, template, file, expected) => {
    expect(await manifestOutputOf(template, file)).toEqual(expected);
  });
});

describe(readPackerManifest.name, () => {
  let dir: string;
  let checkout: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kiln-packer-manifest-'));
    checkout = join(dir, 'source');
    mkdirSync(checkout);
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const local = { templateFile: 'template.json', workingDir: '', within: '' };
  const place = () => ({ ...local, workingDir: checkout, within: checkout });

  it('reads the manifest packer wrote where the template says', async () => {
    mkdirSync(join(checkout, 'out'));
    writeFileSync(join(checkout, 'out/manifest.json'), FIXTURE);

    const read = await readPackerManifest(
      json([{ type: 'manifest', output: 'out/manifest.json' }]),
      place(),
    );

    expect(read).toEqual({
      kind: 'artifacts',
      artifacts: FIXTURE_ARTIFACTS,
      file: 'out/manifest.json',
    });
  });

  it('says packer wrote no manifest when the file is not there', async () => {
    expect(await readPackerManifest(json(['manifest']), place())).toEqual({
      kind: 'problem',
      problem: 'packer wrote no packer-manifest.json',
    });
  });

  it('says what is wrong with a file that is no packer manifest, never quoting it', async () => {
    writeFileSync(join(checkout, 'packer-manifest.json'), 'token=s3cr3t');

    expect(await readPackerManifest(json(['manifest']), place())).toEqual({
      kind: 'problem',
      problem: 'packer-manifest.json is not JSON',
    });
  });

  it.each<[string, (outside: string) => string]>([
    ['a path that climbs out of it', () => '../outside.json'],
    ['an absolute path', (outside) => outside],
    [
      'a link in the checkout to a file outside',
      (outside) => {
        symlinkSync(outside, join(checkout, 'packer-manifest.json'));
        return 'packer-manifest.json';
      },
    ],
  ])('reads nothing outside the checkout: not %s', async (_name, output) => {
    const outside = join(dir, 'outside.json');
    writeFileSync(outside, FIXTURE);
    const file = output(outside);

    expect(await readPackerManifest(json([{ type: 'manifest', output: file }]), place())).toEqual({
      kind: 'problem',
      problem: `${file} is outside the checkout, where kiln does not read`,
    });
  });

  it('reads an absolute path in a build pod, where the mounts bound what it can reach', async () => {
    const elsewhere = join(dir, 'tmp/manifest.json');
    mkdirSync(join(dir, 'tmp'));
    writeFileSync(elsewhere, FIXTURE);

    const read = await readPackerManifest(json([{ type: 'manifest', output: elsewhere }]), {
      templateFile: 'template.json',
      workingDir: checkout,
    });

    expect(read).toMatchObject({ kind: 'artifacts', artifacts: FIXTURE_ARTIFACTS });
  });
});

/** `count` artifacts whose ids are `idBytes` long. */
function artifactsOf(count: number, idBytes = 100): PackerArtifacts {
  return {
    manifestDigest: FIXTURE_ARTIFACTS.manifestDigest,
    artifacts: Array.from({ length: count }, (_, i) => ({
      name: `build-${i}`,
      builderType: 'amazon-ebs',
      artifactId: `us-east-1:ami-${String(i).padStart(4, '0')}`.padEnd(idBytes, 'x'),
    })),
  };
}

describe(packerMessage.name, () => {
  it.each<[string, PackerReport]>([
    ['the artifacts of a manifest', { kind: 'artifacts', artifacts: FIXTURE_ARTIFACTS }],
    ['a manifest with no artifacts', { kind: 'artifacts', artifacts: artifactsOf(0) }],
    ['no manifest, with why', { kind: 'none', reason: NO_MANIFEST_POST_PROCESSOR }],
    ['a problem', { kind: 'problem', problem: 'packer wrote no packer-manifest.json' }],
  ])('round-trips %s through packerFromMessage', (_name, report) => {
    const { message, omitted } = packerMessage(report);

    expect(omitted).toBe(0);
    expect(packerFromMessage(message)).toEqual(report);
  });

  it('carries every artifact as long as they fit', () => {
    const omitted = (count: number) =>
      packerMessage({ kind: 'artifacts', artifacts: artifactsOf(count) }).omitted;
    let count = 1;
    while (omitted(count + 1) === 0) count++;
    const report = { kind: 'artifacts', artifacts: artifactsOf(count) } as const;
    const { message } = packerMessage(report);

    // One artifact more would not fit even without the `truncated` flag.
    const oneMore = JSON.stringify({ kind: 'artifacts', ...artifactsOf(count + 1) });
    expect(Buffer.byteLength(oneMore)).toBeGreaterThan(PACKER_MESSAGE_MAX_BYTES);
    expect(packerFromMessage(message)).toEqual(report);
  });

  it('keeps the digest and the first artifacts that fit, and says the list is truncated', () => {
    const all = artifactsOf(100);

    const { message, omitted } = packerMessage({ kind: 'artifacts', artifacts: all });
    const read = packerFromMessage(message);

    expect(Buffer.byteLength(message)).toBeLessThanOrEqual(PACKER_MESSAGE_MAX_BYTES);
    expect(read.kind === 'artifacts' && read.artifacts).toEqual({
      manifestDigest: all.manifestDigest,
      artifacts: all.artifacts.slice(0, 100 - omitted),
      truncated: true,
    });
    expect(omitted).toBeGreaterThan(0);
    expect(omitted).toBeLessThan(100);
  });

  it('keeps the digest alone when the first artifact does not fit', () => {
    const { message, omitted } = packerMessage({
      kind: 'artifacts',
      artifacts: artifactsOf(1, PACKER_MESSAGE_MAX_BYTES),
    });

    expect(omitted).toBe(1);
    expect(packerFromMessage(message)).toEqual({
      kind: 'artifacts',
      artifacts: {
        manifestDigest: FIXTURE_ARTIFACTS.manifestDigest,
        artifacts: [],
        truncated: true,
      },
    });
  });

  it('shortens a problem that would not fit', () => {
    const problem = `packer wrote no ${'\u001f'.repeat(5000)}.json`;

    const { message } = packerMessage({ kind: 'problem', problem });
    const read = packerFromMessage(message);

    expect(Buffer.byteLength(message)).toBeLessThanOrEqual(PACKER_MESSAGE_MAX_BYTES);
    expect(read.kind === 'problem' && read.problem).toBe(`${problem.slice(0, 511)}…`);
  });
});

describe(packerFromMessage.name, () => {
  const digest = FIXTURE_ARTIFACTS.manifestDigest;
  it.each<[string, string, string]>([
    ['nothing', '', 'the packer-manifest step left no termination message'],
    ['text', 'done', 'the packer-manifest step’s termination message is not JSON'],
    ['a list', '[]', 'the packer-manifest step’s termination message is not an object'],
    [
      'an unknown kind',
      '{"kind":"pushed"}',
      'the packer-manifest step’s termination message is of no kind kiln knows',
    ],
    [
      'no reason',
      '{"kind":"none"}',
      'the packer-manifest step’s termination message says no manifest, but not why',
    ],
    [
      'no problem',
      '{"kind":"problem"}',
      'the packer-manifest step’s termination message has a problem, but not which',
    ],
    [
      'a digest of another kind',
      JSON.stringify({ kind: 'artifacts', manifestDigest: 'md5:abc', artifacts: [] }),
      'the packer-manifest step’s termination message lists no artifacts kiln can read',
    ],
    [
      'an artifact without its id',
      JSON.stringify({
        kind: 'artifacts',
        manifestDigest: digest,
        artifacts: [{ name: 'a', builderType: 'file' }],
      }),
      'the packer-manifest step’s termination message lists no artifacts kiln can read',
    ],
  ])('makes a problem of %s', (_name, text, problem) => {
    expect(packerFromMessage(text)).toEqual({ kind: 'problem', problem });
  });
});

describe(packerNote.name, () => {
  it('says nothing of artifacts, notes a template without a manifest, warns of a problem', () => {
    expect(packerNote({ kind: 'artifacts', artifacts: FIXTURE_ARTIFACTS })).toBeUndefined();
    expect(packerNote({ kind: 'none', reason: NO_MANIFEST_POST_PROCESSOR })).toEqual({
      level: 'INFO',
      text: 'the template has no manifest post-processor; provenance names no artifacts',
    });
    expect(packerNote({ kind: 'problem', problem: 'packer wrote no m.json' })).toEqual({
      level: 'WARN',
      text: "could not read packer's manifest: packer wrote no m.json; provenance names no artifacts",
    });
  });
});

describe('the packer-manifest step', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kiln-packer-step-'));
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** Runs the step on a template and a working directory; its lines, code and message. */
  async function step(template: string, files: Record<string, Buffer | string>) {
    const templateFile = join(dir, 'files/template.json');
    const workingDir = join(dir, 'workspace/source');
    mkdirSync(join(dir, 'files'));
    mkdirSync(workingDir, { recursive: true });
    writeFileSync(templateFile, template);
    for (const [name, content] of Object.entries(files))
      writeFileSync(join(workingDir, name), content);
    const messageFile = join(dir, 'termination-log');
    const lines: string[] = [];
    const code = await runStep(['packer-manifest', templateFile, workingDir], {
      env: { KILN_TERMINATION_MESSAGE_PATH: messageFile },
      print: (line) => lines.push(line),
    });
    return { code, lines, message: readFileSync(messageFile, 'utf8') };
  }

  it('names what the manifest lists and tells the operator', async () => {
    const { code, lines, message } = await step(json(['manifest']), {
      'packer-manifest.json': FIXTURE,
    });

    expect(code).toBe(0);
    expect(lines).toEqual([
      `kiln: packer's manifest packer-manifest.json names 2 artifacts (${FIXTURE_ARTIFACTS.manifestDigest})`,
    ]);
    expect(packerFromMessage(message)).toEqual({ kind: 'artifacts', artifacts: FIXTURE_ARTIFACTS });
  });

  it('says how many artifacts the termination message could not hold', async () => {
    const builds = Array.from({ length: 60 }, (_, i) => ({
      name: `build-${i}`,
      builder_type: 'amazon-ebs',
      artifact_id: `us-east-1:ami-${'0'.repeat(60)}${i}`,
      packer_run_uuid: 'run',
    }));
    const { lines, message } = await step(json(['manifest']), {
      'packer-manifest.json': JSON.stringify({ builds, last_run_uuid: 'run' }),
    });
    const read = packerFromMessage(message);
    const carried = read.kind === 'artifacts' ? read.artifacts.artifacts.length : 0;

    expect(read).toMatchObject({ kind: 'artifacts', artifacts: { truncated: true } });
    expect(lines).toContain(
      `kiln: ${60 - carried} more artifacts are left out of what kiln records: the termination message holds 4096 bytes`,
    );
  });

  it('leaves a template without a manifest to the operator, saying nothing itself', async () => {
    const { code, lines, message } = await step(json([]), {});

    expect(code).toBe(0);
    expect(lines).toEqual([]);
    expect(packerFromMessage(message)).toEqual({
      kind: 'none',
      reason: NO_MANIFEST_POST_PROCESSOR,
    });
  });

  it('reports a manifest packer did not write as a problem, and succeeds', async () => {
    const { code, message } = await step(json([{ type: 'manifest', output: 'm.json' }]), {});

    expect(code).toBe(0);
    expect(packerFromMessage(message)).toEqual({
      kind: 'problem',
      problem: 'packer wrote no m.json',
    });
  });

  it('refuses relative paths as a usage error', async () => {
    const lines: string[] = [];

    const code = await runStep(['packer-manifest', 'template.json', '.'], {
      env: {},
      print: (line) => lines.push(line),
    });

    expect(code).toBe(2);
    expect(lines).toEqual([
      "kiln: usage: packer-manifest <template file> <packer's working directory>, both absolute",
    ]);
  });
});
