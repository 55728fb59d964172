import { Injectable } from '@nestjs/common';
import type { BuildEntity } from '../../src/lifecycle/build.entity.js';
import { BuildLifecycle } from '../../src/lifecycle/build-lifecycle.js';
import type { FailureReason } from '../../src/manifest/failure-reasons.js';
import { BuildRunner, type RunnableBuild } from '../../src/runners/build-runner.js';

/**
 * An in-process runner for API tests: it records what it was asked to do and finishes builds when
 * the test says so, reporting through BuildLifecycle exactly as a real runner does.
 */
@Injectable()
export class FakeRunner extends BuildRunner {
  readonly started: string[] = [];
  /** The spec each started build was handed, by build id. */
  readonly specs = new Map<string, RunnableBuild['spec']>();
  readonly cancelled: string[] = [];
  readonly removed: string[] = [];
  /** When set, the next start() throws, as a runner that cannot reach its backend would. */
  failNextStart = false;

  constructor(private readonly lifecycle: BuildLifecycle) {
    super();
  }

  async start(build: RunnableBuild): Promise<void> {
    if (this.failNextStart) {
      this.failNextStart = false;
      throw new Error('runner backend unreachable');
    }
    await this.lifecycle.setRunnerRef(build.id, `fake/${build.id}`);
    this.started.push(build.id);
    this.specs.set(build.id, build.spec);
  }

  cancel(build: RunnableBuild): Promise<void> {
    this.cancelled.push(build.id);
    return Promise.resolve();
  }

  remove(build: RunnableBuild): Promise<void> {
    this.removed.push(build.id);
    return Promise.resolve();
  }

  succeed(id: string): Promise<BuildEntity> {
    return this.lifecycle.succeed(id);
  }

  fail(
    id: string,
    reason: FailureReason = 'BuildFailed',
    message = 'step 2/3 exited with code 1',
  ): Promise<BuildEntity> {
    return this.lifecycle.fail(id, reason, message);
  }

  progress(id: string, current: number, total: number): Promise<boolean> {
    return this.lifecycle.reportProgress(id, current, total);
  }
}
