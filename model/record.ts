/**
 * A copy of `record` with `key` set to `value`: what `{ ...record, [key]: value }`
 * means, without the object literal with a computed key that V8 builds on a
 * slow path (about twice the time, in the step's hottest lines). Any string
 * may be a resource name, so `__proto__` keeps the literal: assigning it
 * would set the copy's prototype instead.
 */
export function withEntry<V>(record: Readonly<Record<string, V>>, key: string, value: V): Record<string, V> {
  if (key === '__proto__') return { ...record, [key]: value };
  const copy: Record<string, V> = { ...record };
  copy[key] = value;
  return copy;
}

/**
 * The entry of `record` under `key`, or undefined: never a property every
 * object inherits (a resource named `constructor` or `toString` is as free
 * as any other until it is set).
 */
export function entryOf<V>(record: Readonly<Record<string, V>>, key: string): V | undefined {
  const value = record[key];
  return value !== undefined && Object.hasOwn(record, key) ? value : undefined;
}

/** Sets `key` on a record being built, as an own entry also when `key` is `__proto__` (an assignment would set the prototype). */
export function putEntry<V>(record: Record<string, V>, key: string, value: V): void {
  if (key === '__proto__') Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
  else record[key] = value;
}
