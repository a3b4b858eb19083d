import { onExitKill } from './processes.ts';

/** A start whose server does not exist yet (its directory is being made): see LiveServers.starting. */
export interface PendingStart<S> {
  /** The server exists: it is live from now on, and stopped at once should a stopAll() have come meanwhile. */
  arrived(server: S): void;
  /** The start failed before its server existed: nothing to stop. */
  abandoned(): void;
}

/**
 * The servers of one kind this process started and has not stopped
 * (crashed ones included: their directories still exist): killed
 * synchronously at exit and on SIGINT, SIGTERM and SIGHUP once
 * `killAtExit()` was called, or stopped together by `stopAll()`.
 */
export class LiveServers<S extends { stop(): Promise<void>; killSync(): void }> {
  readonly #live = new Set<S>();
  /** Starts before their server exists, each with whether a stopAll() came meanwhile and what that stopAll waits for. */
  readonly #pending = new Set<{ stopRequested: boolean; readonly done: Promise<void>; readonly finish: () => void }>();
  /** One function for every call of killAtExit: registered once. */
  readonly #killAllSync = (): void => {
    for (const server of [...this.#live]) server.killSync();
  };

  /** Kills every live server at exit (registered once, however often called). */
  killAtExit(): void {
    onExitKill(this.#killAllSync);
  }

  add(server: S): void {
    this.#live.add(server);
  }

  delete(server: S): void {
    this.#live.delete(server);
  }

  /**
   * Called before a start's first await: a stopAll() that comes before the
   * server exists (while its directory is made) would otherwise miss it, and
   * the start would go on to spawn a server nobody stops.
   */
  starting(): PendingStart<S> {
    let finish = (): void => undefined;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const entry = { stopRequested: false, done, finish };
    this.#pending.add(entry);
    return {
      arrived: (server) => {
        this.#pending.delete(entry);
        this.#live.add(server);
        if (!entry.stopRequested) return entry.finish();
        // The start sees the stop (its server is stopping) and rejects StoppedWhileStarting.
        void server.stop().then(entry.finish, entry.finish);
      },
      abandoned: () => {
        this.#pending.delete(entry);
        entry.finish();
      },
    };
  }

  async stopAll(): Promise<void> {
    const pending = [...this.#pending];
    for (const entry of pending) entry.stopRequested = true;
    await Promise.all([...[...this.#live].map((server) => server.stop()), ...pending.map((entry) => entry.done)]);
  }
}
