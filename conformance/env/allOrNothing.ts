/**
 * A step that acquires several resources at once (a group's peer gates, say)
 * is all or nothing: when one start fails, the others may already have
 * succeeded, and nobody else holds them to close.
 */

/** Starts every one of `starts` at once; when any fails, closes those that started (waited for) and rejects with the first failure. */
export async function startAll<T>(starts: ReadonlyArray<() => Promise<T>>, close: (started: T) => Promise<void>): Promise<T[]> {
  const settled = await Promise.allSettled(starts.map((start) => Promise.resolve().then(start)));
  const started = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed === undefined) return started;
  // A close that fails too must not hide why the step failed.
  await Promise.allSettled(started.map((s) => close(s)));
  throw failed.reason;
}

/** Waits for every one of `works` (begun at once) to settle, then rejects with the first failure, if any: nothing of the step still runs after it fails. */
export async function allSettledFirst<T>(works: ReadonlyArray<Promise<T>>): Promise<T[]> {
  const settled = await Promise.allSettled(works);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<T>).value);
}
