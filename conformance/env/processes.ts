import { createServer } from 'node:net';
import { finishWithin } from '../realTimeLimit.ts';

/**
 * What every server process the environment starts needs: a free loopback
 * port, and a synchronous clean-up at process exit or on a fatal signal, so
 * that nothing is left running even when a test run dies.
 */

/** Asks the kernel for a free loopback port: listen on port 0, read it, close. */
export function freeLoopbackPort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.once('error', reject);
    probe.listen(0, host, () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => (port > 0 ? resolve(port) : reject(new Error('could not read the probe port'))));
    });
  });
}

/**
 * Starts a server on a free loopback port. The probe and the server's bind
 * race with every other process on the machine, so while `start` reports the
 * port taken it tries a fresh one, until `deadlineMs` (then `tooLate()`).
 */
export async function onFreePort<T>(deadlineMs: number, start: (port: number) => Promise<T | 'address-in-use'>, tooLate: () => Error): Promise<T> {
  for (;;) {
    const result = await start(await freeLoopbackPort());
    if (result !== 'address-in-use') return result;
    if (Date.now() >= deadlineMs) throw tooLate();
  }
}

const cleanups = new Set<() => void>();
const interruptCleanups = new Set<() => Promise<void>>();
let handlersInstalled = false;

/** How long SIGINT/SIGTERM/SIGHUP wait for the async clean-ups (deleting a run's keys and rows on the user's servers). */
export const INTERRUPT_CLEANUP_MS = 5_000;

function runCleanups(): void {
  for (const cleanup of cleanups) cleanup();
}

/** Waits for `work` to settle, at most `ms` of real time; never rejects. */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<void> {
  await finishWithin(work.catch(() => undefined), ms);
}

/** The async clean-ups, together bounded by INTERRUPT_CLEANUP_MS; never rejects. */
function runInterruptCleanups(): Promise<void> {
  return settleWithin(Promise.allSettled([...interruptCleanups].map((cleanup) => cleanup())), INTERRUPT_CLEANUP_MS);
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', runCleanups);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      void runInterruptCleanups().then(() => {
        runCleanups();
        if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
      });
    });
  }
}

/** Runs `killAllSync` at exit and on SIGINT, SIGTERM and SIGHUP (then re-raised when nobody else handles it). */
export function onExitKill(killAllSync: () => void): void {
  cleanups.add(killAllSync);
  installHandlers();
}

/**
 * Runs `cleanup` (bounded, see INTERRUPT_CLEANUP_MS) when SIGINT, SIGTERM or
 * SIGHUP arrives, before the process ends. Returns the function that
 * unregisters it (call it once the cleanup ran the normal way).
 */
export function onInterrupt(cleanup: () => Promise<void>): () => void {
  interruptCleanups.add(cleanup);
  installHandlers();
  return () => interruptCleanups.delete(cleanup);
}
