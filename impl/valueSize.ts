import { InvalidInputError } from '../model/errors.ts';

/**
 * A store value past what its server takes in one request is refused before
 * anything is sent (InvalidInputError 'precondition', naming its size in
 * UTF-8 bytes and the bound): sent, the server refused it or dropped the
 * connection, which read as an outage (UnavailableError) that every retry
 * met again, and cut the calls beside it. `limit` names the server's bound.
 */
export function checkValueBytes(value: string, most: number, where: string, limit: string): void {
  // Cheap before it is exact: a string of at most most/3 UTF-16 code units cannot encode to more than `most` bytes.
  if (value.length <= most / 3) return;
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > most) throw new InvalidInputError('precondition', `value too large for ${where}: ${bytes} bytes, at most ${most} (${limit})`);
}
