/** `STEP 3/5: RUN …`, with `[2/3] ` before it in a multi-stage build. */
const STEP = /^(\[\d+\/\d+\] )?STEP (\d+)\/\d+: /;
/** What `buildah bud --layers` prints after a step it took from the cache. */
const USING_CACHE = /^--> Using cache [0-9a-f]+/;

/**
 * Reads `buildah bud --layers` output line by line and says which steps came from the layer
 * cache (docs/adr/0055-local-layer-cache.md): buildah prints `--> Using cache <id>` after each
 * such step. FROM steps are counted as steps; buildah never takes them from the cache.
 */
export class LayerCacheReport {
  private readonly steps: string[] = [];
  private readonly cached = new Set<string>();
  private current: string | undefined;

  see(line: string): void {
    const step = STEP.exec(line);
    if (step !== null) {
      this.current = `${step[1] ?? ''}${step[2]}`;
      if (!this.steps.includes(this.current)) this.steps.push(this.current);
      return;
    }
    if (this.current !== undefined && USING_CACHE.test(line)) this.cached.add(this.current);
  }

  /** How many steps there were, and how many came from the cache. */
  get counts(): { readonly steps: number; readonly cached: number } {
    return { steps: this.steps.length, cached: this.cached.size };
  }

  /** The build log's line: `layer cache: 3 of 5 steps from the cache (STEP 2, 3, 4)`. */
  summary(): string {
    const { steps, cached } = this.counts;
    const head = `layer cache: ${cached} of ${steps} ${steps === 1 ? 'step' : 'steps'} from the cache`;
    if (cached === 0) return `${head}; every step ran`;
    // Consecutive steps of one stage share its prefix: `[1/2] STEP 2, 3; [2/2] STEP 2`.
    const groups: Array<{ stage: string; numbers: string[] }> = [];
    for (const step of this.steps.filter((s) => this.cached.has(s))) {
      const [, stage = '', number = ''] = /^(\[\d+\/\d+\] )?(\d+)$/.exec(step) ?? [];
      const last = groups.at(-1);
      if (last?.stage === stage) last.numbers.push(number);
      else groups.push({ stage, numbers: [number] });
    }
    const listed = groups.map((g) => `${g.stage}STEP ${g.numbers.join(', ')}`).join('; ');
    return `${head} (${listed})`;
  }
}
