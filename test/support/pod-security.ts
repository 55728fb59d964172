/**
 * The Pod Security Standards checker. It lives in kube/pod-security.ts, beside the API server
 * double whose Pod Security admission runs it: the standalone double (`npm run kube:double`)
 * compiles only that directory. This path stays for the tests that judge pod specs themselves.
 */
export * from './kube/pod-security.js';
