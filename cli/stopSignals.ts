/**
 * Ctrl-C for the commands whose work runs on worker threads (explore, check): this thread hears the signal and sets a
 * flag in shared memory that the busy workers read as they go; the command then prints what was done, marked
 * interrupted, and exits 128 + the signal's number. A second signal ends the process at once.
 */

/** The signals that end such a command early, and the exit code each gives (128 + its number). */
export const STOP_SIGNALS = [
  ['SIGINT', 130],
  ['SIGTERM', 143],
  ['SIGHUP', 129],
] as const;

export type StopSignal = (typeof STOP_SIGNALS)[number];

/**
 * A flag the main thread sets and the workers read: a worker's thread is busy and hears no message until its task
 * is done, but reads shared memory at once.
 */
export class StopFlag {
  readonly buffer = new SharedArrayBuffer(4);
  private readonly cell = new Int32Array(this.buffer);

  set(): void {
    Atomics.store(this.cell, 0, 1);
  }

  get isSet(): boolean {
    return Atomics.load(this.cell, 0) !== 0;
  }
}

/** A worker's reading of a StopFlag's buffer (none: never set). */
export function stopRead(buffer: SharedArrayBuffer | undefined): () => boolean {
  if (buffer === undefined) return () => false;
  const cell = new Int32Array(buffer);
  return () => Atomics.load(cell, 0) !== 0;
}

/**
 * Listens for the stop signals until `remove()`: the first sets `stop` and calls `onStop` (to say so on stderr);
 * `by()` is the signal that stopped the command, null if none did.
 */
export function stopOnSignals(stop: StopFlag, onStop: (signal: StopSignal[0]) => void): { readonly by: () => StopSignal | null; readonly remove: () => void } {
  let by: StopSignal | null = null;
  const handlers = STOP_SIGNALS.map((entry) => {
    const handler = (): void => {
      if (by !== null) process.exit(entry[1]);
      by = entry;
      stop.set();
      onStop(entry[0]);
    };
    process.on(entry[0], handler);
    return [entry[0], handler] as const;
  });
  return { by: () => by, remove: () => handlers.forEach(([signal, handler]) => process.off(signal, handler)) };
}
