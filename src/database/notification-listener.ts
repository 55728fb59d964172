import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Logger } from 'pino';
import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { LOGGER } from '../common/logger.js';

const MAX_BACKOFF_MS = 10_000;

/**
 * A dedicated connection that LISTENs on Postgres channels and survives database restarts:
 * it reconnects with backoff and emits `reconnected`, after which listeners must re-read what
 * they may have missed (notifications sent while disconnected are lost by design of NOTIFY).
 * Events: `notification` (channel, payload), `reconnected`.
 */
export class NotificationListener extends EventEmitter {
  private client: pg.Client | undefined;
  private closed = false;
  private backoffMs = 250;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly connectionString: string,
    private readonly channels: readonly string[],
    private readonly logger: Logger,
  ) {
    super();
  }

  async start(): Promise<void> {
    await this.connect(false);
  }

  private async connect(isReconnect: boolean): Promise<void> {
    const client = new pg.Client({
      connectionString: this.connectionString,
      connectionTimeoutMillis: 5_000,
    });
    client.on('error', (error) => {
      this.logger.warn({ err: error }, 'LISTEN connection lost');
      this.scheduleReconnect(client);
    });
    client.on('end', () => this.scheduleReconnect(client));
    client.on('notification', (message) =>
      this.emit('notification', message.channel, message.payload ?? ''),
    );
    try {
      await client.connect();
      for (const channel of this.channels)
        await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      if (!isReconnect) throw error;
      this.logger.warn({ err: error }, 'LISTEN reconnect failed');
      this.scheduleReconnect(client);
      return;
    }
    this.client = client;
    this.backoffMs = 250;
    if (isReconnect) {
      this.logger.info({ channels: this.channels }, 'LISTEN connection restored');
      this.emit('reconnected');
    }
  }

  private scheduleReconnect(failed: pg.Client): void {
    if (
      this.closed ||
      this.timer !== undefined ||
      (this.client !== undefined && this.client !== failed)
    )
      return;
    this.client = undefined;
    const wait = this.backoffMs * (0.5 + Math.random());
    this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.connect(true);
    }, wait);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}

/** Makes LISTEN connections to the application's database. */
@Injectable()
export class Notifications {
  constructor(
    private readonly dataSource: DataSource,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  listen(channels: readonly string[]): NotificationListener {
    const url = (this.dataSource.options as { url?: string }).url;
    if (url === undefined) throw new Error('the DataSource has no url to LISTEN on');
    return new NotificationListener(url, channels, this.logger);
  }
}
