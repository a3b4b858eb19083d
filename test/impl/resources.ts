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

/** What an acquire ended with: its result's kind, or the rejection's name. */
export async function outcome(p: Promise<{ readonly kind: string }>): Promise<string> {
  return p.then(
    (r) => r.kind,
    (e: unknown) => (e instanceof Error ? e.name : String(e)),
  );
}

/** `p`, or a rejection naming `what` after `ms` (its timer cleared either way). */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** The environment's own resources that came between `before` and now (a restarted server's process and pipes), folded into `baseline`. */
export function rebased(baseline: Resources, before: Resources): Resources {
  const base = new Map(baseline);
  for (const [kind, n] of activeResources()) if ((before.get(kind) ?? 0) < n) base.set(kind, (base.get(kind) ?? 0) + n - (before.get(kind) ?? 0));
  return base;
}
