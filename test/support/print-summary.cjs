// Prints one plain closing line from jest's --json results: "jest: N passed, N failed, N skipped".
const { readFileSync } = require('node:fs');

const results = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const skipped = results.numPendingTests + results.numTodoTests;
process.stdout.write(
  `jest: ${results.numPassedTests} passed, ${results.numFailedTests} failed, ${skipped} skipped\n`,
);
