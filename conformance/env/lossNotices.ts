/**
 * Bounded waits for clients to report their lost connections (a real
 * backend's fault ends sessions on the server; the run goes on once each
 * client has heard of it).
 *
 * A wait is armed before the step that causes the losses, so that no loss
 * can slip past it, and awaited after that step. It is handled from the
 * moment it is armed: if the step fails first (a query refused, a crash
 * that throws), the wait's timeout must not become an unhandled rejection
 * seconds later, in whatever test runs then, and must not keep a timer
 * going (see `cancel`).
 */
export interface LossWait {
  /** Resolves once every client named has reported its loss; rejects at the timeout naming the first that did not. */
  readonly done: Promise<void>;
  /** Ends the wait's timer and forgets it (a no-op once it settled). */
  cancel(): void;
}

export class LossNotices {
  readonly #waiters: Array<Set<() => void>>;

  constructor(
    clients: number,
    private readonly timeoutMs: number,
  ) {
    this.#waiters = Array.from({ length: clients }, () => new Set());
  }

  /** Client `client` has reported a lost connection: every wait armed for it so far is over. */
  noticed(client: number): void {
    const waiters = this.#waiters[client]!;
    const now = [...waiters];
    waiters.clear();
    for (const w of now) w();
  }

  /** A wait for these clients' next losses, armed now; settle it with `await done` and end it with `cancel` in a finally. */
  expect(clients: readonly number[]): LossWait {
    const cancels: Array<() => void> = [];
    const one = (client: number): Promise<void> =>
      new Promise<void>((resolve, reject) => {
        const waiter = (): void => {
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          this.#waiters[client]!.delete(waiter);
          reject(new Error(`client ${client} did not notice its lost connection within ${this.timeoutMs} ms`));
        }, this.timeoutMs);
        this.#waiters[client]!.add(waiter);
        cancels.push(() => {
          clearTimeout(timer);
          this.#waiters[client]!.delete(waiter);
        });
      });
    const done = Promise.all(clients.map(one)).then(() => undefined);
    // Handled from the start: a step that fails before `done` is awaited leaves no rejection behind (awaiting `done` still throws).
    done.catch(() => undefined);
    return { done, cancel: () => cancels.forEach((c) => c()) };
  }
}
