import type { Lease } from '../../impl/lease.ts';
import type { LeaseLock } from '../../impl/leaseLock.ts';
import type { UsingOptions } from '../../impl/using.ts';
import { LockNotAcquiredError, using } from '../../impl/using.ts';
import type { BackendUnderTest, LockClient } from '../adapter.ts';
import type { Misconfiguration } from '../configuration.ts';

type Using = typeof using;

/**
 * A client that takes every lease through `using()`, as application code
 * does: an acquire starts a task that holds the lease (the signal and lease
 * it is handed are what the runner checks), and a release ends that task, so
 * `using()` releases. A denial or timeout comes back from `using()` as
 * LockNotAcquiredError and is read back into the adapter API's result.
 * Background extension is off (extendAtFraction 0): the model has no
 * extension the client did not ask for. Extend goes to the lock.
 */
export function usingClient(lock: LeaseLock, run: Using = using, extendAtFraction = 0): Pick<LockClient, 'acquire' | 'extend' | 'release'> {
  const tasks = new Map<Lease, { readonly finish: () => void; readonly done: Promise<unknown> }>();
  return {
    acquire: (resource, options) =>
      new Promise((resolve, reject) => {
        const o: UsingOptions = { ...options, extendAtFraction };
        // using() calls the task only after its acquire resolved: `task.done` is set by then.
        const task: { done?: Promise<unknown> } = {};
        task.done = run(lock, resource, o, (_signal, lease) =>
          new Promise<void>((finish) => {
            tasks.set(lease, { finish, done: task.done! });
            resolve({ kind: 'granted', lease });
          }),
        );
        task.done.catch((e: unknown) => {
          if (e instanceof LockNotAcquiredError) resolve(e.reason === 'timed-out' ? { kind: 'timed-out' } : { kind: 'denied', reason: e.reason });
          else reject(e);
        });
      }),
    extend: (lease, ttlMs) => lock.extend(lease, ttlMs),
    release: async (lease) => {
      const task = tasks.get(lease);
      if (task === undefined) return lock.release(lease);
      tasks.delete(lease);
      task.finish();
      await task.done.catch(() => undefined);
    },
  };
}

/**
 * using() must refuse an extendAtFraction outside [0, 1) (it would plan each
 * extension at or before now: a spin) with InvalidInputError naming it.
 */
export function usingMisconfigurations(backendWith: (extendAtFraction: number) => BackendUnderTest): Misconfiguration[] {
  return [-0.5, 1, Number.NaN].map((fraction) => ({
    what: `using() with extendAtFraction ${fraction}`,
    names: 'extendAtFraction',
    attempt: async () => {
      const instance = await backendWith(fraction).start({ clients: 1, tokenBase: 0n });
      try {
        await instance.clients[0]!.acquire('r', { ttlMs: 10 });
      } finally {
        await instance.close();
      }
    },
  }));
}
