/**
 * The model's exported tables (RULES, the design and store lists, the
 * matrix rows, the scenarios, the property and fault-class tables, the
 * default alphabet, the empty ghost and cell) are one copy shared by every
 * caller in the process: a caller that edited one would change the model
 * for everyone. They are frozen whole, every object and array in them; a
 * function in them is left as it is (its properties are never read).
 */
export function frozen<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Reflect.ownKeys(value)) frozen((value as Record<PropertyKey, unknown>)[key]);
  }
  return value;
}
