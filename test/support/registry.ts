import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';

/** A real Docker registry (Debian's docker-registry) on 127.0.0.1, with its own storage. */
export class LocalRegistry {
  private constructor(
    private readonly process: ChildProcess,
    private readonly dir: string,
    readonly address: string,
  ) {}

  static async start(): Promise<LocalRegistry> {
    const port = await new Promise<number>((done) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port: p } = server.address() as { port: number };
        server.close(() => done(p));
      });
    });
    const dir = mkdtempSync('/dev/shm/kiln-registry-');
    const config = join(dir, 'config.yml');
    writeFileSync(
      config,
      `version: 0.1\nlog: { level: error }\nstorage: { filesystem: { rootdirectory: ${dir}/data }, delete: { enabled: true } }\nhttp: { addr: 127.0.0.1:${port} }\n`,
    );
    const child = spawn('docker-registry', ['serve', config], { stdio: 'ignore' });
    const registry = new LocalRegistry(child, dir, `127.0.0.1:${port}`);
    const deadline = Date.now() + 15_000;
    for (;;) {
      try {
        if ((await fetch(`http://${registry.address}/v2/`)).status === 200) return registry;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error('docker-registry did not start');
      await new Promise((done) => setTimeout(done, 100));
    }
  }

  async tags(repository: string): Promise<string[]> {
    const response = await fetch(`http://${this.address}/v2/${repository}/tags/list`);
    if (response.status === 404) return [];
    return ((await response.json()) as { tags: string[] | null }).tags ?? [];
  }

  async stop(): Promise<void> {
    if (this.process.exitCode === null && this.process.signalCode === null) {
      const exited = new Promise((done) => this.process.once('exit', done));
      this.process.kill('SIGTERM');
      await exited;
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}
