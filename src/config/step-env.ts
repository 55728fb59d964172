/**
 * What a kiln step in a build's pod (`dist/steps/step-main.js`) may read from its environment:
 * the `KILN_*` settings the Job template sets (upload URL and tokens, build ids, S3 target, out
 * directory, termination-message path) and the S3 credentials a registry Secret provides. Read
 * here, once, like the server's own config; nothing else of the pod's environment reaches a step.
 */
const STEP_VARIABLE = /^(?:KILN_[A-Z0-9_]+|AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY)$/;

export type StepEnv = Readonly<Record<string, string | undefined>>;

export function loadStepEnv(env: NodeJS.ProcessEnv = process.env): StepEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => STEP_VARIABLE.test(name)));
}
