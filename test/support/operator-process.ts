import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { TEST_JWT_SECRET, TEST_SECRETS_KEY } from './auth.js';
import { freePort, isAlive, killTree } from './processes.js';

/** The compiled kiln (`make build`): a crash is only real in a process of its own. */
export const KILN_MAIN = join(__dirname, '..', '..', 'dist', 'main.js');

/**
 * Leader election of the children, shortened (client-go's 15/10/2 s): a SIGKILLed leader cannot
 * release its Lease, so its successor waits for the lease duration before it takes over.
 */
export const FAST_LEASE_ENV = {
  KILN_OPERATOR_LEASE_DURATION_SECONDS: '3',
  KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS: '2',
  KILN_OPERATOR_LEASE_RETRY_PERIOD_SECONDS: '1',
} as const;

export interface OperatorProcessOptions {
  readonly databaseUrl: string;
  readonly kubeconfig: string;
  /** Where the child gets its HOME and data directory (one subdirectory each). */
  readonly dir: string;
  readonly env?: Readonly<Record<string, string>>;
}

/** How much of a child's output a failure message quotes. */
const OUTPUT_TAIL = 6_000;

/**
 * `node dist/main.js` with KILN_ROLE=operator on a shared database and kubeconfig: an operator
 * replica that can be SIGKILLed (no shutdown hook, no Lease release, in-flight requests cut),
 * which an in-process `app.close()` cannot stand in for.
 */
export class OperatorProcess {
  private output = '';
  /** Resolves when the process has exited (by itself or killed). */
  readonly exited: Promise<void>;

  private constructor(
    readonly name: string,
    readonly url: string,
    private readonly child: ChildProcess,
  ) {
    child.stdout?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.exited = new Promise((done) => {
      if (child.exitCode !== null || child.signalCode !== null) done();
      else child.once('exit', () => done());
    });
  }

  /** Starts the child and returns at once (it may act before it answers /readyz). */
  static async spawn(name: string, options: OperatorProcessOptions): Promise<OperatorProcess> {
    if (!existsSync(KILN_MAIN)) throw new Error(`${KILN_MAIN} is missing: run \`make build\``);
    const port = await freePort();
    const home = mkdtempSync(join(options.dir, `${name}-`));
    const child = spawn(process.execPath, [KILN_MAIN], {
      env: {
        PATH: process.env['PATH'],
        HOME: home,
        PORT: String(port),
        KILN_HOST: '127.0.0.1',
        KILN_ROLE: 'operator',
        KILN_RUNNER: 'kubernetes',
        KUBECONFIG: options.kubeconfig,
        DATABASE_URL: options.databaseUrl,
        KILN_DATA_DIR: join(home, 'data'),
        KILN_JWT_SECRET: TEST_JWT_SECRET,
        KILN_SECRETS_KEY: TEST_SECRETS_KEY,
        KILN_OPERATOR_DRAIN_DEADLINE_SECONDS: '5',
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new OperatorProcess(name, `http://127.0.0.1:${port}`, child);
  }

  get pid(): number {
    const pid = this.child.pid;
    if (pid === undefined) throw new Error(`${this.name} did not start:\n${this.tail()}`);
    return pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null && isAlive(this.pid);
  }

  /** It has held the Lease in its life (it logged the start of a term). */
  get hasLed(): boolean {
    return this.output.includes('"msg":"started leading"');
  }

  /** Waits for /readyz to answer 200; fails with the child's output if it exits first. */
  async ready(ms = 30_000): Promise<this> {
    const deadline = Date.now() + ms;
    for (;;) {
      if (!this.running)
        throw new Error(`${this.name} exited before it was ready:\n${this.tail()}`);
      try {
        if ((await fetch(`${this.url}/readyz`)).status === 200) return this;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`${this.name} was not ready:\n${this.tail()}`);
      await new Promise((done) => setTimeout(done, 100));
    }
  }

  /** Waits until it leads (the Lease of a killed leader expires first). */
  async leading(ms = 30_000): Promise<this> {
    const deadline = Date.now() + ms;
    while (!this.hasLed) {
      if (!this.running) throw new Error(`${this.name} exited before it led:\n${this.tail()}`);
      if (Date.now() > deadline) throw new Error(`${this.name} did not lead:\n${this.tail()}`);
      await new Promise((done) => setTimeout(done, 50));
    }
    return this;
  }

  /**
   * SIGKILL, synchronously: when this returns the kernel has the signal and the child runs no
   * more JavaScript (it cannot read an answer written after this call).
   */
  kill(): void {
    if (this.running) killTree(this.pid);
  }

  /** SIGTERM (a graceful stop that releases the Lease); SIGKILL after `ms`. */
  async stop(ms = 15_000): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.kill(), ms);
    await this.exited;
    clearTimeout(timer);
  }

  /** The end of what it printed, for failure messages. */
  tail(): string {
    return this.output.length <= OUTPUT_TAIL ? this.output : `…${this.output.slice(-OUTPUT_TAIL)}`;
  }

  describe(): string {
    const end = this.child.signalCode ?? this.child.exitCode ?? 'running';
    return `---- ${this.name} (pid ${this.child.pid ?? '-'}, ${end}) ----\n${this.tail()}`;
  }
}

/**
 * The operator children of one test, started on one database and kubeconfig: `stopAll()` (from
 * the ground's reset) stops what still runs, and `explained(body)` appends every child's output
 * to a failure, since a child's mistakes show only there.
 */
export class OperatorProcesses {
  private readonly started: OperatorProcess[] = [];

  constructor(private readonly options: OperatorProcessOptions) {}

  async spawn(): Promise<OperatorProcess> {
    const child = await OperatorProcess.spawn(`operator-${this.started.length + 1}`, {
      ...this.options,
      env: { ...FAST_LEASE_ENV, ...this.options.env },
    });
    this.started.push(child);
    return child;
  }

  async stopAll(): Promise<void> {
    for (const child of this.started.splice(0)) await child.stop();
  }

  async explained<T>(body: () => Promise<T>): Promise<T> {
    try {
      return await body();
    } catch (error) {
      if (error instanceof Error) {
        const outputs = this.started.map((c) => c.describe()).join('\n');
        error.message = `${error.message}\n\n${outputs}`;
      }
      throw error;
    }
  }
}
