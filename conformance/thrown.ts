import { redactSecrets } from './env/redact.ts';

/**
 * A thrown value as a report shows it. An adapter may throw anything (a
 * string, a plain object, null): the report names what it threw, and never
 * fails on it itself (reading `.name` of null would end the whole check
 * with the harness's own TypeError).
 */
export function describeThrown(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  // An Error from another realm (a worker, a vm context) fails instanceof but reads the same.
  if (typeof e === 'object' && e !== null && typeof (e as { name?: unknown }).name === 'string' && typeof (e as { message?: unknown }).message === 'string') {
    return `${(e as Error).name}: ${(e as Error).message}`;
  }
  return `a value that is no Error (${shown(e)})`;
}

/** At most this much of a thrown value is shown: it may be anything, of any size. */
const MAX_SHOWN = 200;

function shown(e: unknown): string {
  let text: string;
  try {
    text = typeof e === 'string' ? JSON.stringify(e) : (JSON.stringify(e, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x)) ?? String(e));
  } catch {
    // A cycle, or a toJSON that throws: the type is still worth saying.
    text = `a ${typeof e}`;
  }
  // Redacted before it is cut: a cut inside a password's value leaves no closing quote for the redaction to find later.
  const redacted = redactSecrets(text);
  return redacted.length > MAX_SHOWN ? `${redacted.slice(0, MAX_SHOWN)}…` : redacted;
}
