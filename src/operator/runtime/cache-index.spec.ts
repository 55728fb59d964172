import { CacheIndex } from './cache-index.js';
import { FakeClock } from './clock.js';
import { Informer } from './informer.js';
import { MemoryListWatch } from '../../../test/support/operator-runtime-fakes.js';

interface Pod {
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
}

const pod = (name: string, job?: string): Pod => ({
  metadata: { name, namespace: 'ns', ...(job === undefined ? {} : { labels: { job } }) },
});

describe(CacheIndex.name, () => {
  function setup() {
    const clock = new FakeClock();
    const source = new MemoryListWatch<Pod>();
    const informer = new Informer(source, { clock });
    const byJob = new CacheIndex(informer, (p) => p.metadata.labels?.['job']);
    return { clock, source, informer, byJob };
  }
  const names = (pods: Pod[]) => pods.map((p) => p.metadata.name).sort();

  it('finds cached objects by their value through adds, updates, deletes and a relist', async () => {
    const { clock, source, informer, byJob } = setup();
    source.upsert(pod('a-1', 'a'));
    source.upsert(pod('a-2', 'a'));
    source.upsert(pod('lonely'));
    informer.start();
    await clock.flush();
    expect(names(byJob.get('a'))).toEqual(['a-1', 'a-2']);

    source.upsert(pod('b-1', 'b'));
    source.upsert(pod('a-2', 'b')); // relabelled
    source.remove('ns', 'a-1');
    await clock.flush();
    expect(names(byJob.get('a'))).toEqual([]);
    expect(names(byJob.get('b'))).toEqual(['a-2', 'b-1']);

    // Missed while the watch was down, history compacted: the relist brings the index along.
    source.goDown();
    await clock.advance(1_000);
    source.remove('ns', 'b-1');
    source.upsert(pod('c-1', 'c'));
    source.compact();
    source.goUp();
    await clock.advance(60_000);
    expect(names(byJob.get('b'))).toEqual(['a-2']);
    expect(names(byJob.get('c'))).toEqual(['c-1']);
    expect(byJob.get('c')).toEqual([informer.get('ns/c-1')]);
    await informer.stop();
  });
});
