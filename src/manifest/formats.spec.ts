import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { PackerManifestError, packerArtifactsOf } from './formats.js';

/** A manifest packer wrote, byte for byte (fixtures/README.md says where each comes from). */
const fixture = (name: string): Buffer => readFileSync(join(__dirname, 'fixtures', name));

/** A manifest as packer writes it, from its builds. */
function manifest(builds: unknown[], lastRun: unknown = 'run-2'): Buffer {
  return Buffer.from(JSON.stringify({ builds, last_run_uuid: lastRun }, null, 2));
}

const build = (name: string, run: string, artifactId = 'File'): Record<string, unknown> => ({
  name,
  builder_type: 'file',
  build_time: 1795869700,
  files: [{ name: `${name}.txt`, size: 5 }],
  artifact_id: artifactId,
  packer_run_uuid: run,
  custom_data: null,
});

describe(packerArtifactsOf.name, () => {
  it('lists the builds of the last run of a file packer 1.6.6 wrote twice, with the digest of its bytes', () => {
    expect(packerArtifactsOf(fixture('packer-manifest-file.json'))).toEqual({
      // sha256sum src/manifest/fixtures/packer-manifest-file.json
      manifestDigest: 'sha256:adb0d52c6b041e40bd08ebd13193ede3bdfbd3c56f0ee7163d75af3cdaf96b97',
      artifacts: [
        { name: 'world', builderType: 'file', artifactId: 'File' },
        { name: 'hello', builderType: 'file', artifactId: 'File' },
      ],
    });
  });

  it('keeps an amazon-ebs artifact id naming an AMI in each region as one string', () => {
    expect(packerArtifactsOf(fixture('packer-manifest-amazon-ebs.json'))).toEqual({
      manifestDigest: 'sha256:7e9e28ff1db3f8684b6b79b3c6abf80df6cef39e6ab0fb5b11db9741f6790502',
      artifacts: [
        {
          name: 'ubuntu',
          builderType: 'amazon-ebs',
          artifactId:
            'eu-central-1:ami-0b70b458400c49bb3,us-east-1:ami-00c645bf39a7a66c2,us-west-2:ami-03b71c51298c1dc68',
        },
      ],
    });
  });

  it('digests the bytes as they are: the same builds written otherwise have another digest', () => {
    const builds = [build('hello', 'run-2')];
    const pretty = packerArtifactsOf(manifest(builds));
    const compact = packerArtifactsOf(
      Buffer.from(JSON.stringify({ builds, last_run_uuid: 'run-2' })),
    );

    expect(compact.artifacts).toEqual(pretty.artifacts);
    expect(compact.manifestDigest).not.toBe(pretty.manifestDigest);
    expect(compact.manifestDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('lists none when no build is of the last run', () => {
    expect(packerArtifactsOf(manifest([build('hello', 'run-1')])).artifacts).toEqual([]);
  });

  it.each<[string, Buffer, string]>([
    ['text that is not JSON', Buffer.from('secret-token-value {'), 'is not JSON'],
    ['a list', Buffer.from('[]'), 'has no "builds" list'],
    ['no builds', Buffer.from('{"last_run_uuid": "run-2"}'), 'has no "builds" list'],
    [
      'no last run',
      manifest([build('hello', 'run-2')], null),
      'names no last run ("last_run_uuid")',
    ],
    [
      'an empty last run',
      manifest([build('hello', 'run-2')], ''),
      'names no last run ("last_run_uuid")',
    ],
    ['a build that is no object', manifest(['hello']), 'has a build 0 that is no object'],
    [
      'a build without a name',
      manifest([{ ...build('hello', 'run-2'), name: undefined }]),
      'has a build 0 without a name or builder_type',
    ],
    [
      'a build whose artifact id is not a string',
      manifest([build('hello', 'run-2'), { ...build('world', 'run-2'), artifact_id: 7 }]),
      'has a build 1 without an artifact_id',
    ],
  ])('refuses %s, saying why without quoting the file', (_name, bytes, message) => {
    let thrown: unknown;
    try {
      packerArtifactsOf(bytes);
    } catch (error) {
      thrown = error;
    }

    expect(thrown).toBeInstanceOf(PackerManifestError);
    expect((thrown as Error).message).toBe(message);
  });
});
