/**
 * The tables lockcheck keeps in PostgreSQL. Created on first use; all
 * statements are idempotent.
 *
 * - lockcheck_tokens: one durable, strictly increasing fencing token per
 *   resource, incremented in the same statement (and transaction) that takes
 *   the lock.
 * - lockcheck_store: the fenced store, one row per resource; a write is one
 *   conditional INSERT ... ON CONFLICT DO UPDATE ... WHERE.
 */
export const SCHEMA = `
CREATE TABLE IF NOT EXISTS lockcheck_tokens (
  resource text PRIMARY KEY,
  token bigint NOT NULL CHECK (token >= 0)
);
CREATE TABLE IF NOT EXISTS lockcheck_store (
  resource text PRIMARY KEY,
  value text NOT NULL,
  token bigint NOT NULL CHECK (token >= 0),
  highest bigint NOT NULL CHECK (highest >= 0)
);
`;

/**
 * Takes the session lock if free and, only then, mints the next token. One
 * statement, one round trip: $1 key, $2 resource, $3 token base. No row: held.
 */
export const TRY_LOCK_AND_MINT = `
WITH l AS (SELECT pg_try_advisory_lock($1::bigint) AS got)
INSERT INTO lockcheck_tokens (resource, token)
SELECT $2, $3::bigint + 1 FROM l WHERE l.got
ON CONFLICT (resource) DO UPDATE SET token = lockcheck_tokens.token + 1
RETURNING token::text
`;

/** Mints the next token of $1 (fresh rows start at $2 + 1), in its own committed statement. */
export const MINT = `
INSERT INTO lockcheck_tokens (resource, token) VALUES ($1, $2::bigint + 1)
ON CONFLICT (resource) DO UPDATE SET token = lockcheck_tokens.token + 1
RETURNING token::text
`;

/**
 * SQLSTATEs of a concurrent CREATE TABLE IF NOT EXISTS that won the race on
 * the same table: unique_violation (23505, on the catalog), duplicate_table
 * (42P07) and duplicate_object (42710, the table's row type: seen when many
 * sessions of one process made the schema of a fresh database at once).
 */
const CREATE_RACE = new Set(['23505', '42P07', '42710']);
/** How many times the schema is sent again after a lost race (each loss means another session just made a table). */
const CREATE_ATTEMPTS = 3;

/**
 * Creates the tables; tolerates another session creating them at the same
 * moment. A lost race fails the whole multi-statement SCHEMA at that table,
 * so the tables after it may not exist yet: it is sent again.
 */
export async function ensureSchema(db: { query(text: string): Promise<unknown> }): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await db.query(SCHEMA);
      return;
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code === undefined || !CREATE_RACE.has(code)) throw e;
      if (attempt >= CREATE_ATTEMPTS) return;
    }
  }
}
