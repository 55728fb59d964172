/**
 * kiln's own steps inside a build's pod (docs/adr/0019-build-steps-and-artifacts.md), run from
 * kiln's image as `node dist/steps/step-main.js <step>` (step-main.ts):
 *
 * - `image-ref <format> <name>`: reads what the builder wrote (file `name` of the steps'
 *   directory, KILN_STEP_OUT_DIR) about the image it pushed and
 *   writes the pushed reference (`name@sha256:…`) to `$KILN_STEP_OUT_DIR/image` for the SBOM
 *   and scan steps, and the digest with every pushed reference (pushedMessage) to
 *   KILN_TERMINATION_MESSAGE_PATH, the container's termination message, for the operator.
 * - `upload`: PUTs `sbom.json` and `scan.json` from that directory to kiln with the build's
 *   upload tokens. A step that wrote nothing is said in the log, not hidden.
 * - `s3-upload <oci-tar|oci-dir> <name>` (registry_type s3): uploads the OCI image layout the
 *   builder wrote (file or directory `name` of the steps' directory; a directory is archived
 *   first, beside it) to `KILN_S3_BUCKET` with S3ImageStore, under s3ImageKey's key for
 *   KILN_PROJECT_ID and KILN_BUILD_NUMBER, and reports the digest and `s3://` address as
 *   image-ref does. Signs in with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY when set (from the
 *   build's Secret), else as the pod's own identity (the SDK's default chain).
 * - `packer-manifest <template> <working dir>` (packer builds): reads the file the template's
 *   manifest post-processor wrote, relative to packer's working directory (readPackerManifest),
 *   and writes what it lists, or why there is nothing, to KILN_TERMINATION_MESSAGE_PATH for the
 *   operator (packerMessage). It never fails the build: the operator says what went amiss.
 *
 * No NestJS, no configuration module: this process reads only the variables below, which the
 * Job sets (the tokens from the build's own Secret).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { basename, isAbsolute, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { OCI_LAYOUT_FORMATS, type OciLayoutFormat } from '../manifest/formats.js';
import { ociLayoutDigest, writeLayoutTar } from '../registries/oci-layout.js';
import { S3ImageStore, s3ImageKey } from '../registries/s3-upload.js';
import {
  PACKER_MESSAGE_MAX_BYTES,
  packerArtifactsLine,
  packerMessage,
  readPackerManifest,
} from './packer-manifest.js';
import {
  PUSHED_MESSAGE_MAX_BYTES,
  pushedImages,
  pushedMessage,
  referenceOf,
} from './pushed-image.js';
import { PUSHED_IMAGE_FORMATS, type PushedImageFormat } from '../manifest/formats.js';

const KINDS = ['sbom', 'scan'] as const;
const ATTEMPTS = 4;

/** What a step reads of its process: the environment, and where its lines go. */
export interface StepIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly print: (line: string) => void;
  /** Aborted when the pod is told to stop (SIGTERM at its deadline, a cancel). */
  readonly signal?: AbortSignal;
}

async function readOptional(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

async function imageRef(
  io: StepIo,
  format: string | undefined,
  file: string | undefined,
): Promise<number> {
  const say = (text: string): void => io.print(`kiln: ${text}`);
  if (
    !PUSHED_IMAGE_FORMATS.includes(format as PushedImageFormat) ||
    file === undefined ||
    file.includes('/')
  ) {
    say(`usage: image-ref <${PUSHED_IMAGE_FORMATS.join('|')}> <file name in the steps' directory>`);
    return 2;
  }
  const text = await readOptional(join(outDir(io), file));
  if (text === undefined) {
    say(`the builder wrote no ${file}: there is no pushed image to describe or scan`);
    return 0;
  }
  const result = pushedImages(format as PushedImageFormat, text.toString('utf8'));
  if ('problem' in result) {
    say(`cannot tell which image was pushed: ${result.problem}`);
    return 0;
  }
  const reference = referenceOf(result);
  await writeFile(join(outDir(io), 'image'), `${reference}\n`);
  say(`the pushed image is ${reference}`);
  await terminationMessage(io, say, pushedMessage(result));
  return 0;
}

/**
 * Tells the operator what was pushed through the container's termination message, which the
 * kubelet keeps in the pod's status. Not being able to write it costs the build only its
 * recorded digest (the operator says so), so it does not fail the step.
 */
async function terminationMessage(
  io: StepIo,
  say: (text: string) => void,
  { message, omitted }: { message: string; omitted: number },
): Promise<void> {
  await writeTerminationMessage(
    io,
    say,
    message,
    omitted > 0
      ? `${omitted} more pushed reference${omitted === 1 ? ' is' : 's are'} left out of what kiln records: the termination message holds ${PUSHED_MESSAGE_MAX_BYTES} bytes`
      : undefined,
  );
}

/** Writes KILN_TERMINATION_MESSAGE_PATH, after saying what did not fit in it (`left`). */
async function writeTerminationMessage(
  io: StepIo,
  say: (text: string) => void,
  message: string,
  left: string | undefined,
): Promise<void> {
  const path = io.env.KILN_TERMINATION_MESSAGE_PATH;
  if (path === undefined || path === '') return;
  if (left !== undefined) say(left);
  try {
    await writeFile(path, message);
  } catch (error) {
    say(`could not write the termination message: ${(error as Error).message}`);
  }
}

/**
 * Reads packer's manifest for the operator (see the module comment). What it found is said here;
 * that there is none, or why it cannot be read, the operator says at the end of the build log,
 * as the local runner does.
 */
async function packerManifest(
  io: StepIo,
  template: string | undefined,
  workingDir: string | undefined,
): Promise<number> {
  const say = (text: string): void => io.print(`kiln: ${text}`);
  if (
    template === undefined ||
    !isAbsolute(template) ||
    workingDir === undefined ||
    !isAbsolute(workingDir)
  ) {
    say("usage: packer-manifest <template file> <packer's working directory>, both absolute");
    return 2;
  }
  const text = await readFile(template, 'utf8').catch(() => undefined);
  const read =
    text === undefined
      ? ({
          kind: 'problem',
          problem: 'the template cannot be read for its manifest post-processor',
        } as const)
      : await readPackerManifest(text, { templateFile: basename(template), workingDir });
  if (read.note !== undefined) say(read.note);
  if (read.kind === 'artifacts') say(packerArtifactsLine(read.file, read.artifacts));
  const { message, omitted } = packerMessage(read);
  await writeTerminationMessage(
    io,
    say,
    message,
    omitted > 0
      ? `${omitted} more artifact${omitted === 1 ? ' is' : 's are'} left out of what kiln records: the termination message holds ${PACKER_MESSAGE_MAX_BYTES} bytes`
      : undefined,
  );
  return 0;
}

async function upload(io: StepIo): Promise<number> {
  const say = (text: string): void => io.print(`kiln: ${text}`);
  const base = io.env.KILN_UPLOAD_URL;
  const buildId = io.env.KILN_BUILD_ID;
  if (base === undefined || buildId === undefined) {
    say('KILN_UPLOAD_URL and KILN_BUILD_ID must be set');
    return 2;
  }
  let failed = false;
  for (const kind of KINDS) {
    const body = await readOptional(join(outDir(io), `${kind}.json`));
    if (body === undefined) {
      say(
        `no ${kind === 'sbom' ? 'SBOM' : 'scan report'} to upload: the ${kind} step wrote none (its lines above say why)`,
      );
      continue;
    }
    const token = io.env[`KILN_UPLOAD_TOKEN_${kind.toUpperCase()}`];
    if (token === undefined || token === '') {
      say(`no upload token for the ${kind}: the build's Secret lacks it`);
      failed = true;
      continue;
    }
    const url = `${base.replace(/\/+$/, '')}/api/v1/builds/${encodeURIComponent(buildId)}/${kind}`;
    if (!(await put(say, url, token, body, kind))) failed = true;
  }
  return failed ? 1 : 0;
}

/** One upload, retried on network errors, 429 and 5xx; false when kiln did not store it. */
async function put(
  say: (text: string) => void,
  url: string,
  token: string,
  body: Buffer,
  kind: string,
): Promise<boolean> {
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    let problem: string;
    try {
      const response = await fetch(url, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: new Uint8Array(body),
        signal: AbortSignal.timeout(60_000),
      });
      const text = await response.text();
      if (response.ok) {
        say(`uploaded the ${kind} (${body.length} bytes)`);
        return true;
      }
      problem = `kiln answered ${response.status}: ${text.slice(0, 500)}`;
      if (response.status < 500 && response.status !== 429) {
        say(`the ${kind} was refused: ${problem}`);
        return false;
      }
    } catch (error) {
      problem = (error as Error).message;
    }
    if (attempt === ATTEMPTS) {
      say(`could not upload the ${kind} after ${ATTEMPTS} attempts: ${problem}`);
      return false;
    }
    say(`uploading the ${kind} failed (${problem}); trying again`);
    await sleep(1000 * 2 ** (attempt - 1));
  }
  return false;
}

/**
 * Uploads the builder's OCI layout to S3 (see the module comment). Any failure fails the step,
 * and so the build: its image exists nowhere else.
 */
async function s3Upload(
  io: StepIo,
  format: string | undefined,
  name: string | undefined,
): Promise<number> {
  const say = (text: string): void => io.print(`kiln: ${text}`);
  if (
    !OCI_LAYOUT_FORMATS.includes(format as OciLayoutFormat) ||
    name === undefined ||
    name === '' ||
    name.includes('/')
  ) {
    say(`usage: s3-upload <${OCI_LAYOUT_FORMATS.join('|')}> <name in the steps' directory>`);
    return 2;
  }
  const { env } = io;
  const [bucket, region, project] = [env.KILN_S3_BUCKET, env.KILN_S3_REGION, env.KILN_PROJECT_ID];
  const buildNumber = Number(env.KILN_BUILD_NUMBER);
  if (!bucket || !region || !project || !Number.isSafeInteger(buildNumber)) {
    say('KILN_S3_BUCKET, KILN_S3_REGION, KILN_PROJECT_ID and KILN_BUILD_NUMBER must be set');
    return 2;
  }
  const source = join(outDir(io), name);
  const keyId = env.AWS_ACCESS_KEY_ID;
  const secret = env.AWS_SECRET_ACCESS_KEY;
  const store = new S3ImageStore({
    bucket,
    region,
    ...(env.KILN_S3_PREFIX ? { prefix: env.KILN_S3_PREFIX } : {}),
    ...(env.KILN_S3_ENDPOINT ? { endpoint: env.KILN_S3_ENDPOINT } : {}),
    forcePathStyle: env.KILN_S3_FORCE_PATH_STYLE === 'true',
    ...(keyId && secret ? { credentials: { accessKeyId: keyId, secretAccessKey: secret } } : {}),
  });
  try {
    let tarPath = source;
    if (format === 'oci-dir') {
      tarPath = `${source}.tar`;
      await writeLayoutTar(source, tarPath);
    }
    const { digest } = await ociLayoutDigest(tarPath);
    const key = s3ImageKey({ prefix: env.KILN_S3_PREFIX, project, buildNumber, digest });
    // Aborted with the pod: the multipart upload is aborted too, leaving no parts in the bucket.
    const uploaded = await store.upload(tarPath, {
      key,
      ...(io.signal === undefined ? {} : { signal: io.signal }),
    });
    say(`uploaded ${uploaded.uri} (${uploaded.digest}, ${uploaded.size} bytes)`);
    await terminationMessage(
      io,
      say,
      pushedMessage({ digest: uploaded.digest, images: [uploaded.uri] }),
    );
    return 0;
  } catch (error) {
    say(`the image was not uploaded: ${uploadProblem(error, name)}`);
    return 1;
  }
}

/**
 * Why the upload failed, for the build log. S3ImageStore's errors name the `s3://` address and
 * never a credential; a layout kiln cannot read is an OciLayoutError saying why.
 */
function uploadProblem(error: unknown, name: string): string {
  if ((error as NodeJS.ErrnoException).code === 'ENOENT') return `the builder wrote no ${name}`;
  return (error as Error).message;
}

function outDir(io: StepIo): string {
  return io.env.KILN_STEP_OUT_DIR ?? '/kiln/out';
}

/** Runs one step; the exit code the container ends with. */
export async function runStep(argv: readonly string[], io: StepIo): Promise<number> {
  const [step, ...rest] = argv;
  switch (step) {
    case 'image-ref':
      return imageRef(io, rest[0], rest[1]);
    case 'upload':
      return upload(io);
    case 's3-upload':
      return s3Upload(io, rest[0], rest[1]);
    case 'packer-manifest':
      return packerManifest(io, rest[0], rest[1]);
    default:
      io.print(
        'kiln: usage: step-main.js image-ref <format> <file> | upload | s3-upload <format> <name> | packer-manifest <template> <dir>',
      );
      return 2;
  }
}
