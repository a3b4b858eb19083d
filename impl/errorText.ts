/**
 * Any value as text for an error's message. An error's constructor must not
 * throw in the place of the error it makes: a template literal throws a
 * TypeError on a Symbol, and String() on an object whose toString throws.
 */
export function asText(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return String(value);
  } catch {
    // An object or function whose toString throws, or an object without a prototype.
    return aTypeOf(value);
  }
}

/** A value's type with its article, for a message: "an object", "a function", "a number". */
export function aTypeOf(value: unknown): string {
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** An error's message as Error takes it: absent stays absent (an empty message), anything else as text. */
export function messageText(message: unknown): string | undefined {
  return message === undefined ? undefined : asText(message);
}
