// Prints one plain closing line from jest's --json results: "jest: N passed, N failed, N skipped",
// after the ten test files that took longest, so that CI's output says where the suite's time went.
const { readFileSync } = require('node:fs');
const { relative } = require('node:path');

const results = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const files = results.testResults
  .map((file) => ({
    name: relative(process.cwd(), file.name),
    // A file that failed to run has no times.
    ms: Number.isFinite(file.endTime - file.startTime) ? file.endTime - file.startTime : 0,
  }))
  .sort((a, b) => b.ms - a.ms);
const total = files.reduce((sum, file) => sum + file.ms, 0);
process.stdout.write(
  `jest: the slowest of ${files.length} files (${(total / 1000).toFixed(0)} s in all, across workers):\n`,
);
for (const file of files.slice(0, 10)) {
  process.stdout.write(`  ${(file.ms / 1000).toFixed(1).padStart(7)} s  ${file.name}\n`);
}
const skipped = results.numPendingTests + results.numTodoTests;
process.stdout.write(
  `jest: ${results.numPassedTests} passed, ${results.numFailedTests} failed, ${skipped} skipped\n`,
);
