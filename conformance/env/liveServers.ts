import { onExitKill } from './processes.ts';

/**
 * The servers of one kind this process started and has not stopped
 * (crashed ones included: their directories still exist): killed
 * synchronously at exit and on SIGINT, SIGTERM and SIGHUP once
 * `killAtExit()` was called, or stopped together by `stopAll()`.
 */
export class LiveServers<S extends { stop(): Promise<void>; killSync(): void }> {
  readonly #live = new Set<S>();
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

  async stopAll(): Promise<void> {
    await Promise.all([...this.#live].map((server) => server.stop()));
  }
}
