import { LayerCacheReport } from './layer-cache-report.js';

/** What `buildah bud --layers` printed, read line by line. */
function reportOf(output: string): LayerCacheReport {
  const report = new LayerCacheReport();
  for (const line of output.split('\n')) report.see(line);
  return report;
}

describe(LayerCacheReport.name, () => {
  it.each<[string, string, string]>([
    [
      'a first build: no step from the cache',
      [
        'STEP 1/3: FROM scratch',
        'STEP 2/3: COPY busybox /bin/busybox',
        '--> 414bad5c1a7',
        'STEP 3/3: RUN echo hi',
        'hi',
        'COMMIT localhost/kiln/b1:build',
        '--> 582adc56922',
      ].join('\n'),
      'layer cache: 0 of 3 steps from the cache; every step ran',
    ],
    [
      'an unchanged Dockerfile: every step after FROM',
      [
        'STEP 1/3: FROM scratch',
        'STEP 2/3: COPY busybox /bin/busybox',
        '--> Using cache 414bad5c1a710b49a2fd90fb0ca6667c75b6210a06bcdcec6de13bd09a41e1df',
        '--> 414bad5c1a7',
        'STEP 3/3: RUN echo hi',
        '--> Using cache 582adc569223ecce70eea5a8625c16e1ae4c22101442fc7a415337605779ea69',
        'COMMIT localhost/kiln/b2:build',
      ].join('\n'),
      'layer cache: 2 of 3 steps from the cache (STEP 2, 3)',
    ],
    [
      'the last step changed: it runs, those before it come from the cache',
      [
        'STEP 1/4: FROM scratch',
        'STEP 2/4: COPY busybox /bin/busybox',
        '--> Using cache 414bad5c1a71',
        'STEP 3/4: RUN echo one',
        '--> Using cache b9a24b45f969',
        'STEP 4/4: RUN echo changed',
        'changed',
        '--> 0c1d2e3f4a5b',
      ].join('\n'),
      'layer cache: 2 of 4 steps from the cache (STEP 2, 3)',
    ],
    [
      'a multi-stage build names each stage',
      [
        '[1/2] STEP 1/2: FROM scratch AS base',
        '[1/2] STEP 2/2: COPY busybox /bin/busybox',
        '--> Using cache 414bad5c1a71',
        '[2/2] STEP 1/2: FROM base',
        '[2/2] STEP 2/2: RUN echo hi',
        '--> Using cache 582adc569223',
      ].join('\n'),
      'layer cache: 2 of 4 steps from the cache ([1/2] STEP 2; [2/2] STEP 2)',
    ],
    [
      'a step that merely prints "--> Using cache" does not count before any STEP',
      ['--> Using cache abc', 'STEP 1/1: FROM scratch'].join('\n'),
      'layer cache: 0 of 1 step from the cache; every step ran',
    ],
  ])('%s', (_name, output, summary) => {
    expect(reportOf(output).summary()).toBe(summary);
  });

  it('counts the steps and the cached ones', () => {
    const report = reportOf('STEP 1/2: FROM scratch\nSTEP 2/2: RUN true\n--> Using cache 0a1b');
    expect(report.counts).toEqual({ steps: 2, cached: 1 });
  });
});
