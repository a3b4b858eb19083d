import { InvalidInputError, shown } from './errors.ts';
import type { ModelErrorCode } from './errors.ts';

export { shown };

/**
 * Checks of the arguments the model's public functions take, so a wrong type
 * is an InvalidInputError naming the argument, never a TypeError from deep
 * inside. The model's own hot paths do not pass through here: they call the
 * unchecked functions with values these checks (or initialWorld and step)
 * accepted before.
 */

export function refuse(name: string, wanted: string, value: unknown, code: ModelErrorCode = 'invalid-config'): never {
  throw new InvalidInputError(code, `${name} must be ${wanted}, got ${shown(value)}`);
}

export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** An object argument (or a nested one): not null, a primitive or an array. */
export function checkObject(value: unknown, name: string, wanted = 'an object'): Record<string, unknown> {
  if (!isObject(value)) refuse(name, wanted, value);
  return value;
}

/** An optional options object: absent (undefined) or an object. */
export function checkOptions<T>(value: T, name: string): T {
  if (value !== undefined) checkObject(value, name, 'an options object or absent');
  return value;
}

export function checkArray<T>(value: T, name: string, wanted = 'an array'): T {
  if (!Array.isArray(value)) refuse(name, wanted, value);
  return value;
}

export function checkFunction<T>(value: T, name: string, wanted = 'a function'): T {
  if (typeof value !== 'function') refuse(name, wanted, value);
  return value;
}

/** One of a closed set of strings. */
export function checkOneOf<T extends string>(value: unknown, name: string, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) refuse(name, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`, value);
  return value as T;
}

/** A finite number (the model's times and clock readings). */
export function checkNumber(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) refuse(name, 'a finite number', value);
  return value;
}

export function checkInteger(value: unknown, name: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) refuse(name, `an integer in [${min}, ${max}]`, value);
  return value;
}

/** A command's outer shape: an object with a string kind (step checks the rest, and names an unknown kind). */
export function checkCommandShape(command: unknown, name: string): void {
  if (!isObject(command) || typeof command.kind !== 'string') refuse(name, 'a command (an object with a kind)', command);
}

/** An alphabet or a schedule: an array of commands. */
export function checkCommands(commands: unknown, name: string): void {
  checkArray(commands, name, 'an array of commands');
  (commands as readonly unknown[]).forEach((c, i) => checkCommandShape(c, `${name}[${i}]`));
}
