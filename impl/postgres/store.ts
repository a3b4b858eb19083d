import type pg from 'pg';
import type { StorePolicy } from '../../model/design.ts';
import { checkResource, checkToken, InvalidInputError } from '../../model/errors.ts';
import type { FencedStore } from '../fencedStore.ts';

/**
 * The fenced store as a table: each write is one conditional statement,
 * never a read followed by a write. The policy is the WHERE of the upsert:
 * strict updates only when token > highest, monotonic when token >= highest.
 */
const GUARD: Readonly<Record<Exclude<StorePolicy, 'transactional'>, string>> = {
  strict: 'WHERE EXCLUDED.token > lockcheck_store.highest',
  monotonic: 'WHERE EXCLUDED.token >= lockcheck_store.highest',
  unfenced: '',
};

function writeStatement(policy: StorePolicy): string {
  const guard = policy === 'transactional' ? '' : GUARD[policy];
  // The outer SELECT reads the table as it was before the upsert: on a rejection, that is the highest token that won.
  return `
WITH w AS (
  INSERT INTO lockcheck_store (resource, value, token, highest) VALUES ($1, $2, $3::bigint, $3::bigint)
  ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value, token = EXCLUDED.token,
    highest = GREATEST(lockcheck_store.highest, EXCLUDED.token)
  ${guard}
  RETURNING 1
)
SELECT (SELECT count(*) FROM w)::int AS accepted, (SELECT highest::text FROM lockcheck_store WHERE resource = $1) AS highest`;
}

/** Anything that runs a query: a pool, a client, or a client inside a transaction. */
export type Queryable = Pick<pg.ClientBase, 'query'>;

export function postgresFencedStore(db: Queryable, policy: StorePolicy): FencedStore {
  // Named: prepared once per connection, so the server does not parse and plan the upsert on every write (one name per policy: the texts differ).
  // Rows as arrays: no object with named properties built per reply.
  const statement = { name: `lockcheck_fenced_write_${policy}`, text: writeStatement(policy), rowMode: 'array' } as const;
  return {
    async write(resource, token, value) {
      checkResource(resource);
      checkToken(token);
      if (typeof value !== 'string') throw new InvalidInputError('precondition', 'value must be a string');
      const r = await db.query<[accepted: number, highest: string | null]>(statement, [resource, value, token.toString()]);
      const [accepted, highest] = r.rows[0]!;
      return accepted === 1 ? { kind: 'accepted' } : { kind: 'rejected', highest: BigInt(highest ?? '0') };
    },
    async read(resource) {
      checkResource(resource);
      const r = await db.query<{ value: string; token: string }>('SELECT value, token::text AS token FROM lockcheck_store WHERE resource = $1', [resource]);
      const row = r.rows[0];
      return row === undefined ? { value: null, token: null } : { value: row.value, token: BigInt(row.token) };
    },
  };
}
