#!/usr/bin/env node
// Lints kiln's OpenAPI document with redocly (recommended rules, redocly.yaml) and Spectral (oas
// ruleset, .spectral.yaml), and fails on any error or warning of either (`make lint-openapi`).
//
//   node scripts/openapi-lint.cjs            the document of the compiled app in dist/ (build
//                                            first); needs no database and no running server
//   node scripts/openapi-lint.cjs doc.json   that document (test/openapi-contract.spec.ts)
'use strict';

const { execFile } = require('node:child_process');
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join, resolve } = require('node:path');
const { writeDocumentFromDist } = require('./openapi-document.cjs');

const ROOT = resolve(__dirname, '..');
const BIN = join(ROOT, 'node_modules', '.bin');

/** Runs a CLI of node_modules/.bin to its end: its exit status and what it wrote. */
function run(command, args) {
  return new Promise((done, fail) => {
    execFile(
      join(BIN, command),
      args,
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== 'number') fail(error);
        else done({ status: error === null ? 0 : error.code, stdout, stderr });
      },
    );
  });
}

/** redocly's report, one problem a line; clean when it has none (redocly exits 0 on warnings). */
async function redocly(document) {
  const { status, stdout, stderr } = await run('redocly', [
    'lint',
    '--config',
    join(ROOT, 'redocly.yaml'),
    '--extends',
    'recommended',
    '--format',
    'json',
    document,
  ]);
  let report;
  try {
    report = JSON.parse(stdout);
  } catch {
    return { clean: false, text: `redocly did not report (exit ${status}):\n${stderr}` };
  }
  const lines = report.problems.map((problem) => {
    const where = problem.location.map((location) => location.pointer).join(', ');
    return `redocly ${problem.severity} ${problem.ruleId} ${where}: ${problem.message}`;
  });
  const { errors, warnings } = report.totals;
  lines.push(`redocly (recommended): ${errors} errors, ${warnings} warnings`);
  return { clean: errors === 0 && warnings === 0, text: lines.join('\n') };
}

/** Spectral's own report; clean when it found nothing of warning severity or above. */
async function spectral(document) {
  const { status, stdout, stderr } = await run('spectral', [
    'lint',
    '--ruleset',
    join(ROOT, '.spectral.yaml'),
    '--fail-severity=warn',
    document,
  ]);
  // Its errors of its own (a bad ruleset, an unreadable file) go to stderr.
  const text = [`spectral (oas): ${stdout.trim()}`, stderr.trim()].filter(Boolean).join('\n');
  return { clean: status === 0, text };
}

async function main() {
  const given = process.argv[2];
  const workDir = mkdtempSync(join(tmpdir(), 'kiln-openapi-'));
  try {
    const document = given === undefined ? await writeDocumentFromDist(workDir) : resolve(given);
    // Both run, at once, whatever the other finds: one run shows every problem.
    const reports = await Promise.all([redocly(document), spectral(document)]);
    for (const { text } of reports) console.log(text);
    process.exitCode = reports.every(({ clean }) => clean) ? 0 : 1;
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  process.stderr.write(`openapi-lint: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
