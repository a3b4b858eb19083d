/** Items by key, in their order (a Map of arrays, filled in one pass). */
export function groupBy<T, K>(items: Iterable<T>, key: (item: T) => K): Map<K, T[]> {
  const out = new Map<K, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list === undefined) out.set(k, [item]);
    else list.push(item);
  }
  return out;
}

/**
 * One key for several names (a resource and a register key, a fault and its
 * target): JSON of the list, so that no choice of names can make two lists
 * one key ('a/b' + 'c' and 'a' + 'b/c' joined with '/' are one register).
 */
export function compositeKey(...parts: readonly string[]): string {
  return JSON.stringify(parts);
}
