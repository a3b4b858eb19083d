/**
 * A wait with a stated deadline made of bounded attempts and pauses keeps to
 * it only if each attempt and each pause is cut to what is left: an attempt
 * bounded by its own fixed bound alone runs that whole bound past the
 * deadline when it starts just before it.
 */

/** An attempt's bound: `capMs`, cut to what is left before `deadline` (at least 1 ms: the last attempt still runs). */
export function leftWithin(capMs: number, deadline: number): number {
  return Math.max(1, Math.min(capMs, deadline - Date.now()));
}

/** A pause between attempts, cut to what is left before `deadline` (0 once it has passed). */
export function pauseWithin(ms: number, deadline: number): number {
  return Math.max(0, Math.min(ms, deadline - Date.now()));
}
