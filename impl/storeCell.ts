import { MAX_TOKEN } from '../model/errors.ts';
import { ServerRefusedError } from './errors.ts';

/**
 * Reading back a fenced-store cell the etcd and ZooKeeper stores keep as
 * text. The key or znode may hold something lockcheck did not write (a
 * prefix or root shared with other data, a hand edit): that is a
 * ServerRefusedError('schema', 'UnexpectedValue'), which no retry fixes,
 * not a bare SyntaxError (a read) nor an outage to retry (a write). The data
 * itself is never shown: it may be anything.
 */
export function foreignCell(where: string, why: string): ServerRefusedError {
  return new ServerRefusedError('schema', 'UnexpectedValue', `${where} does not hold a lockcheck cell (${why})`);
}

/**
 * A token as stored: decimal digits (zero-padded or not) of a value in
 * [0, 2^63-1]. `form`, for a token a server compared as text, is the one
 * form the store writes: 'plain' (no leading zero: Redis compares by length,
 * then digits) or 'padded' (19 digits: etcd compares bytes). A highest token
 * in another form (edited by hand) was compared wrongly, and a write refused
 * naming it; it is refused as data the store did not write.
 */
export function storedToken(text: unknown, where: string, field: string, form?: 'plain' | 'padded'): bigint {
  if (typeof text !== 'string' || !/^\d{1,19}$/.test(text) || BigInt(text) > MAX_TOKEN) throw foreignCell(where, `${field} is not a token`);
  if ((form === 'plain' && !/^(0|[1-9]\d*)$/.test(text)) || (form === 'padded' && text.length !== 19)) throw foreignCell(where, `${field} is not a token as the store writes it`);
  return BigInt(text);
}

/** A cell's JSON: an object whose `value` is a string and whose `tokens` fields are tokens. */
export function parseCell<K extends string>(text: string, where: string, tokens: readonly K[]): { readonly value: string } & Record<K, bigint> {
  let cell: unknown;
  try {
    cell = JSON.parse(text);
  } catch {
    throw foreignCell(where, 'not JSON');
  }
  if (typeof cell !== 'object' || cell === null || Array.isArray(cell)) throw foreignCell(where, 'not a JSON object');
  const fields = cell as Record<string, unknown>;
  if (typeof fields['value'] !== 'string') throw foreignCell(where, 'value is not a string');
  const out: Record<string, unknown> = { value: fields['value'] };
  for (const k of tokens) out[k] = storedToken(fields[k], where, k);
  return out as { readonly value: string } & Record<K, bigint>;
}
