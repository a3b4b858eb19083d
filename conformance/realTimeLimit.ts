/**
 * Waits for `work`, at most `ms` of real time (a timer, never the run's virtual clock: a teardown must
 * end even when nothing drives that clock). True when it finished in time; a failure in time is
 * thrown. False when it was still running: a failure after that is nobody's to handle and is dropped.
 */
export async function finishWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  work.catch(() => undefined);
  try {
    return await Promise.race([work.then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}
