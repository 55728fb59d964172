import { Injectable } from '@nestjs/common';

type Listener = (userId: string) => void;

/**
 * The changes this process makes to who may do what (TenancyService), announced synchronously
 * once they are committed. An API process's AccessCache drops the user's entries before the
 * change's caller goes on, so its next request is answered from the database: the notification
 * Postgres sends for the same change (ACCESS_CHANNEL) reaches this process only later. The CLI has
 * no cache and so no listener here; other processes learn of its changes from that notification.
 */
@Injectable()
export class AccessChanges {
  private readonly listeners = new Set<Listener>();

  /** Calls `listener` with the user of each change; returns what stops it. */
  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The user's access (enabled, memberships, roles) may have changed. */
  changed(userId: string): void {
    for (const listener of this.listeners) listener(userId);
  }
}
