/**
 * The entry point of kiln's steps in a build's pod: `node dist/steps/step-main.js <step> …`
 * (see run-step.ts). Its settings come from its environment through src/config/step-env.ts.
 */
import { loadStepEnv } from '../config/step-env.js';
import { runStep } from './run-step.js';

// The kubelet sends SIGTERM at the Job's deadline or a cancel: a step in flight stops cleanly.
const stop = new AbortController();
process.once('SIGTERM', () => stop.abort(new Error('the pod is stopping (SIGTERM)')));

runStep(process.argv.slice(2), {
  env: loadStepEnv(),
  print: (line) => process.stdout.write(`${line}\n`),
  signal: stop.signal,
}).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stdout.write(`kiln: step failed: ${(error as Error).message}\n`);
    process.exitCode = 1;
  },
);
