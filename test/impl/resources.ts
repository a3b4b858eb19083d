/**
 * What this process holds open, counted by kind (process.getActiveResourcesInfo():
 * 'Timeout', 'TCPSocketWrap', 'TCPServerWrap', 'FSReqCallback', ...), and a
 * bounded wait for the counts to come back to a baseline: a client that
 * leaves a timer, a socket or a listener behind after close() keeps a count
 * above it.
 */
export type Resources = ReadonlyMap<string, number>;

export function activeResources(): Resources {
  const counts = new Map<string, number>();
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

/** The kinds with more now than in `baseline`, as 'Timeout +1'. */
function above(baseline: Resources, now: Resources): string[] {
  return [...now].filter(([kind, n]) => n > (baseline.get(kind) ?? 0)).map(([kind, n]) => `${kind} +${n - (baseline.get(kind) ?? 0)}`);
}

/**
 * Resolves once no kind of resource is above `baseline`; throws naming the
 * kinds still above after `ms`. Looks every 20 ms from a timer's callback, when
 * that timer is no longer active itself. `ms` is kept below the timeouts the
 * tests give their clients: a timer left behind is still there when the wait ends.
 */
export async function backToBaseline(baseline: Resources, what: string, ms = 3000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const left = above(baseline, activeResources());
    if (left.length === 0) return;
    if (Date.now() >= until) throw new Error(`${what}: still held ${ms} ms after close: ${left.join(', ')}`);
  }
}
