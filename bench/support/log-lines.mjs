import { randomBytes } from 'node:crypto';

/** A small deterministic PRNG (mulberry32), so every run feeds the same text. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PACKAGES = [
  'lodash',
  'express',
  'typescript',
  '@babel/core',
  'webpack',
  'react-dom',
  'golang.org/x/net',
  'github.com/spf13/cobra',
  'numpy',
  'requests',
  'openssl-libs',
  'ca-certificates',
];

const hex = (random, length) => {
  let out = '';
  while (out.length < length) out += Math.floor(random() * 0x100000000).toString(16);
  return out.slice(0, length);
};

/** Builder output of the usual kinds (BuildKit, kaniko, buildah, npm, go, apk), ~100 bytes a line. */
const TEMPLATES = [
  (r, n) =>
    `#${5 + (n % 9)} ${(n / 40).toFixed(3)} npm warn deprecated ${pick(r, PACKAGES)}@${ver(r)}: this version is no longer supported, please upgrade`,
  (r) =>
    `#7 sha256:${hex(r, 64)} ${(r() * 90).toFixed(2)}MB / 92.41MB ${(r() * 9).toFixed(1)}s done`,
  (r) =>
    `INFO[${pad(Math.floor(r() * 400))}] Unpacking rootfs as cmd RUN apk add --no-cache ${pick(r, PACKAGES)} requires it (layer ${Math.floor(r() * 30)} of 30).`,
  (r) =>
    `Copying blob sha256:${hex(r, 64)} done | ${Math.floor(r() * 90)}.${Math.floor(r() * 9)}MiB`,
  (r) =>
    `time="2026-11-22T10:${pad2(r)}:${pad2(r)}Z" level=info msg="Taking snapshot of files... (${Math.floor(r() * 9000)} files, ${Math.floor(r() * 900)} MB)" build_id=${hex(r, 8)}`,
  (r) =>
    `go: downloading ${pick(r, PACKAGES)} v0.${Math.floor(r() * 40)}.${Math.floor(r() * 9)} (${Math.floor(r() * 900)} kB, module cache miss, proxy.golang.org responded in ${Math.floor(r() * 900)}ms)`,
  (r) =>
    `    at Module._compile (/workspace/node_modules/${pick(r, PACKAGES)}/lib/index.js:${Math.floor(r() * 900)}:${Math.floor(r() * 80)}) [builder stage 2]`,
  (r) =>
    `(${Math.floor(r() * 90)}/${90}) Installing ${pick(r, PACKAGES)} (${ver(r)}-r${Math.floor(r() * 5)}) from the main Alpine repository`,
  (r) =>
    `added ${Math.floor(r() * 1500)} packages, and audited ${Math.floor(r() * 1600)} packages in ${Math.floor(r() * 90)}s; 0 vulnerabilities found, 12 funding requests`,
  (r) =>
    `WARN[${pad(Math.floor(r() * 400))}] Failed to retrieve image ${pick(r, PACKAGES)}:latest from remote, falling back to cache`,
];

function pick(random, list) {
  return list[Math.floor(random() * list.length)];
}
function ver(random) {
  return `${Math.floor(random() * 9)}.${Math.floor(random() * 30)}.${Math.floor(random() * 20)}`;
}
function pad(n) {
  return String(n).padStart(4, '0');
}
function pad2(random) {
  return String(Math.floor(random() * 60)).padStart(2, '0');
}

/** Five values as a build would register them: tokens, a registry password, a cloud key. */
export function makeSecrets() {
  return [
    `ghp_${randomBytes(27).toString('base64url')}`,
    `npm_${randomBytes(27).toString('base64url')}`,
    randomBytes(18).toString('base64'),
    `AKIA${randomBytes(10).toString('hex').toUpperCase()}`,
    `glpat-${randomBytes(15).toString('base64url')}`,
  ];
}

/**
 * `count` lines of realistic builder output. One line in `secretEvery` carries one of `secrets`
 * (raw, or base64 in a basic-auth header), as a leaked build argument would.
 */
export function makeLines(count, { seed = 1, secrets = [], secretEvery = 200 } = {}) {
  const random = prng(seed);
  const lines = new Array(count);
  for (let n = 0; n < count; n++) {
    if (secrets.length > 0 && n % secretEvery === secretEvery - 1) {
      const k = (n + 1) / secretEvery;
      const secret = secrets[k % secrets.length];
      lines[n] =
        k % 2 === 0
          ? `#9 0.412 + npm config set //registry.npmjs.org/:_authToken=${secret}`
          : `> GET /v2/ HTTP/1.1 Authorization: Basic ${Buffer.from(`ci:${secret}`).toString('base64')}`;
    } else {
      lines[n] = TEMPLATES[Math.floor(random() * TEMPLATES.length)](random, n);
    }
  }
  return lines;
}

export function averageBytes(lines) {
  let total = 0;
  for (const line of lines) total += Buffer.byteLength(line, 'utf8');
  return lines.length === 0 ? 0 : total / lines.length;
}
