/**
 * The tables lockcheck keeps in PostgreSQL. Created on first use; all
 * statements are idempotent.
 *
 * - lockcheck_tokens: one durable, strictly increasing fencing token per
 *   resource, incremented in the same statement (and transaction) that takes
 *   the lock. A row deleted (or the table truncated) would start again at
 *   the base, and a row set lower would count up through tokens already
 *   issued: either mints a token twice (FENCE-1). Triggers refuse both
 *   (SQLSTATE 23001, naming the table), unless the session says
 *   `SET lockcheck.reset_tokens = on`: a reset on purpose (tests, a
 *   database whose fenced data went with it). The lock's own statements only
 *   ever raise a token. The triggers are made with the tables, by a role
 *   that may (the tables' owner); a role that may not skips them
 *   (docs/postgres.md, "The lock record changed behind the holder").
 * - lockcheck_store: the fenced store, one row per resource; a write is one
 *   conditional INSERT ... ON CONFLICT DO UPDATE ... WHERE. A row is the
 *   store's memory of the highest token it accepted: deleted, truncated or
 *   lowered by hand, a stale holder's write would land after it (STORE-1).
 *   The same triggers refuse that, with the same reset.
 */
import { checkMethods } from '../options.ts';
/**
 * The three triggers that keep one table's rows (made or skipped on their
 * own): an UPDATE lowering `column` or renaming a row, a DELETE and a
 * TRUNCATE are refused with `why` in the message, unless the session resets
 * on purpose. A role that may not make triggers (not the table's owner)
 * skips them, and the lock works as before them.
 */
function keptBy(table: string, column: string, why: string): string {
  const run = `EXECUTE FUNCTION lockcheck_kept('${why}')`;
  return `
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '${table}'::regclass AND tgname = '${table}_kept') THEN
      CREATE TRIGGER ${table}_kept BEFORE UPDATE ON ${table} FOR EACH ROW
        WHEN (NEW.${column} < OLD.${column} OR NEW.resource <> OLD.resource) ${run};
      CREATE TRIGGER ${table}_kept_delete BEFORE DELETE ON ${table} FOR EACH ROW ${run};
      CREATE TRIGGER ${table}_kept_truncate BEFORE TRUNCATE ON ${table} FOR EACH STATEMENT ${run};
    END IF;
  EXCEPTION WHEN insufficient_privilege THEN
    NULL;
  END;`;
}

/** The tables lockcheck's PostgreSQL locks and store use (lockcheck_tokens, lockcheck_store) and the token rows' trigger, as DDL that may run again: what ensureSchema sends. */
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
DO $lockcheck$
BEGIN
  IF to_regprocedure('lockcheck_kept()') IS NULL THEN
    CREATE FUNCTION lockcheck_kept() RETURNS trigger LANGUAGE plpgsql AS $kept$
    BEGIN
      IF current_setting('lockcheck.reset_tokens', true) = 'on' THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
      END IF;
      RAISE EXCEPTION '%: % refused: %; SET lockcheck.reset_tokens = on to reset on purpose', TG_TABLE_NAME, TG_OP, TG_ARGV[0]
        USING ERRCODE = 'restrict_violation', TABLE = TG_TABLE_NAME;
    END
    $kept$;
  END IF;
  ${keptBy('lockcheck_tokens', 'token', 'a fencing token row never goes down or away (its tokens would be minted again)')}
  ${keptBy('lockcheck_store', 'highest', 'the highest token of a fenced store row never goes down or away (a stale write would be accepted after it)')}
END
$lockcheck$;
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
 * sessions of one process made the schema of a fresh database at once; also
 * a trigger made twice), and duplicate_function (42723: the token rows'
 * trigger function, made by another session between our check and our
 * CREATE FUNCTION).
 */
const CREATE_RACE = new Set(['23505', '42P07', '42710', '42723']);
/** How many times the schema is sent again after a lost race (each loss means another session just made a table). */
const CREATE_ATTEMPTS = 3;

/**
 * Creates the tables; tolerates another session creating them at the same
 * moment. A lost race fails the whole multi-statement SCHEMA at that table,
 * so the tables after it may not exist yet: it is sent again.
 */
export async function ensureSchema(db: { query(text: string): Promise<unknown> }): Promise<void> {
  checkMethods(db, 'db', 'a pg Client or Pool', ['query']);
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
