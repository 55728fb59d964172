import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDocument, type Tags } from 'yaml';
import { HELM, requireKubeTools } from '../kube/kubectl.js';

// Renders Helm charts in jest specs with helm itself: the helm 4 that scripts/kube-tools.sh puts
// under .tools/kube (`helm template` for the manifests, `helm install --dry-run=client` for the
// notes), so what a test reads is what `helm install` would send.

/** What to render, in `helm template` terms. */
export interface RenderOptions {
  /** The chart directory. */
  chartDir: string;
  /** Values files, merged in order (`-f`). */
  valuesFiles?: string[];
  /** Values merged after the files, as one more values file would be (null deletes a key). */
  values?: unknown;
  /** `.Release.Name`; default `release-name`, as `helm template` without a name. */
  releaseName?: string;
  /** `.Release.Namespace`; default `default`. */
  namespace?: string;
  /** Sets `.Release.IsUpgrade` instead of `.Release.IsInstall` (`--is-upgrade`). */
  upgrade?: boolean;
  /** `.Capabilities.KubeVersion`, e.g. `v1.32.0` (`--kube-version`). */
  kubeVersion?: string;
  /** API versions added to `.Capabilities.APIVersions` (`--api-versions`). */
  apiVersions?: string[];
  /** Prints the chart's crds/ files first (`--include-crds`). */
  includeCrds?: boolean;
  /**
   * Renders without checking values.schema.json first (`--skip-schema-validation`), to reach the
   * templates' own guards, which protect installs that skip the schema.
   */
  skipSchemaValidation?: boolean;
}

/** One YAML document of the rendered stream. */
export interface RenderedDocument {
  /** The file it came from, as in helm's `# Source:` line: `<chart name>/templates/<file>`. */
  source: string;
  /** The document as printed, without the `---` and `# Source:` lines. */
  text: string;
  /** The document parsed the way Kubernetes reads YAML (YAML 1.1: `yes` is a boolean). */
  object: Record<string, unknown>;
}

export interface RenderedChart {
  /** What `helm template` printed. */
  stream: string;
  /** The stream's documents in order; documents holding only comments are left out. */
  documents: RenderedDocument[];
  /** The rendered templates/NOTES.txt (what `helm install` prints after installing). */
  notes?: string;
}

/**
 * Renders a chart with `helm template`; throws an Error carrying helm's stderr. `notes` is
 * rendered when first read (one more helm run).
 */
export function renderChart(options: RenderOptions): RenderedChart {
  const stream = withValues(options, (valueArgs) => {
    const args = ['template', options.releaseName ?? 'release-name', options.chartDir];
    args.push('--namespace', options.namespace ?? 'default', ...valueArgs);
    if (options.upgrade === true) args.push('--is-upgrade');
    if (options.kubeVersion !== undefined) args.push('--kube-version', options.kubeVersion);
    for (const apiVersion of options.apiVersions ?? []) args.push('--api-versions', apiVersion);
    if (options.includeCrds === true) args.push('--include-crds');
    return helm(args, options.chartDir);
  });
  const chart: RenderedChart = { stream, documents: parseStream(stream) };
  let notes: string | undefined;
  Object.defineProperty(chart, 'notes', {
    enumerable: true,
    get: () => (notes ??= renderNotes(options)),
  });
  return chart;
}

/** The chart's templates/NOTES.txt as `helm install` prints it (empty without one). */
export function renderNotes(options: RenderOptions): string {
  const release = withValues(options, (valueArgs) =>
    helm(
      [
        'install',
        options.releaseName ?? 'release-name',
        options.chartDir,
        '--namespace',
        options.namespace ?? 'default',
        ...valueArgs,
        '--dry-run=client',
        '--output',
        'json',
      ],
      options.chartDir,
    ),
  );
  return (JSON.parse(release) as { info?: { notes?: string } }).info?.notes ?? '';
}

let home: string | undefined;

/** helm with its config, cache and data in a directory of this process, never the user's. */
function helm(args: string[], chartDir: string): string {
  requireKubeTools();
  home ??= mkdtempSync(join(tmpdir(), 'kiln-helm-'));
  const result = spawnSync(HELM, args, {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    env: {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: home,
      HELM_CACHE_HOME: join(home, 'cache'),
      HELM_CONFIG_HOME: join(home, 'config'),
      HELM_DATA_HOME: join(home, 'data'),
      // No cluster: `helm install --dry-run=client` must not read a kubeconfig.
      KUBECONFIG: join(home, 'no-kubeconfig'),
    },
  });
  if (result.error !== undefined) throw result.error;
  if (result.status !== 0) throw new Error(`rendering ${chartDir} failed: ${result.stderr.trim()}`);
  return result.stdout;
}

/** `-f` for each values file, and the extra values as one more file (JSON is YAML). */
function withValues<T>(options: RenderOptions, render: (valueArgs: string[]) => T): T {
  const args = (options.valuesFiles ?? []).flatMap((file) => ['--values', file]);
  if (options.skipSchemaValidation === true) args.push('--skip-schema-validation');
  if (options.values === undefined) return render(args);
  const dir = mkdtempSync(join(tmpdir(), 'kiln-helm-values-'));
  try {
    const file = join(dir, 'values.json');
    writeFileSync(file, JSON.stringify(options.values));
    return render([...args, '--values', file]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// yaml.v2, which Kubernetes decodes manifests with, reads booleans the YAML 1.1 way but keeps
// timestamps and base-60 numbers (`8080:80`) as strings.
const kubernetesTags = (tags: Tags): Tags =>
  tags.filter(
    (tag) =>
      typeof tag === 'string' ||
      (tag.tag !== 'tag:yaml.org,2002:timestamp' && tag.format !== 'TIME'),
  );

/**
 * Splits helm's stream at its `---` + `# Source:` headers. A header's block normally holds one
 * document; a CRD file printed by --include-crds may hold several, separated by `---` lines.
 */
function parseStream(stream: string): RenderedDocument[] {
  const headers = [...stream.matchAll(/^---\n# Source: (.+)\n/gm)];
  return headers.flatMap((header, i) => {
    const source = header[1] ?? '';
    const block = stream.slice(header.index + header[0].length, headers[i + 1]?.index);
    return block.split(/^---[ \t]*$/m).flatMap((piece): RenderedDocument[] => {
      const text = piece.trim();
      const document = parseDocument(text, { version: '1.1', customTags: kubernetesTags });
      const [error] = document.errors;
      if (error !== undefined) throw new Error(`${source} is not valid YAML: ${error.message}`);
      const object: unknown = document.toJS();
      if (object === null || object === undefined) return [];
      if (typeof object !== 'object' || Array.isArray(object)) {
        throw new Error(`${source} rendered a document that is not a mapping:\n${text}`);
      }
      return [{ source, text, object: object as Record<string, unknown> }];
    });
  });
}
