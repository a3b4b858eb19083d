/** What a bounded wait saw: the work's value, or that it was still running at the limit. */
export type Bounded<T> = { readonly done: true; readonly value: T } | { readonly done: false };

/**
 * Waits for `work`, at most `ms` of real time (a timer, never a run's virtual clock: a teardown or a
 * stress run must end even when nothing drives that clock). A failure in time is thrown; a failure
 * after the limit is nobody's to handle and is dropped.
 */
export async function valueWithin<T>(work: Promise<T>, ms: number): Promise<Bounded<T>> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<Bounded<T>>((resolve) => {
    timer = setTimeout(() => resolve({ done: false }), ms);
  });
  work.catch(() => undefined);
  try {
    return await Promise.race([work.then((value): Bounded<T> => ({ done: true, value })), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** `valueWithin` for work whose value does not matter: true when it finished in time. */
export async function finishWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  return (await valueWithin(work, ms)).done;
}

/**
 * `work`'s outcome, or after `ms` of real time (a timer, never a run's
 * virtual clock) the error `late()` makes: a bound on a call that has none of
 * its own. A failure of `work` after the limit is dropped.
 */
export function rejectAfter<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(late()), ms);
    work.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
