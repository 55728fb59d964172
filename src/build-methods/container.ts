/**
 * The `container` method: a Containerfile generated from the manifest's base image and
 * instructions (one Dockerfile instruction per element). Build-time environment entries become
 * ARG lines with defaults, so RUN steps see them without baking them into the image. Shared by
 * the local and the Kubernetes runners.
 */
export function containerfileFor(
  baseImage: string,
  instructions: readonly string[],
  environment: Readonly<Record<string, string>> = {},
): string {
  const args = Object.entries(environment).map(
    ([name, value]) => `ARG ${name}=${JSON.stringify(value)}`,
  );
  return [`FROM ${baseImage}`, ...args, ...instructions].join('\n') + '\n';
}
