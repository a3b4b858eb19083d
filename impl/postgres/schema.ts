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
/** Why a hand edit of each table is refused (the triggers' argument, in their message). */
const TOKENS_KEPT = 'a fencing token row never goes down or away (its tokens would be minted again)';
const STORE_KEPT = 'the highest token of a fenced store row never goes down or away (a stale write would be accepted after it)';

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
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'lockcheck_tokens'::regclass AND tgname = 'lockcheck_tokens_kept') THEN
      CREATE TRIGGER lockcheck_tokens_kept BEFORE UPDATE ON lockcheck_tokens FOR EACH ROW
        WHEN (NEW.token < OLD.token OR NEW.resource <> OLD.resource) EXECUTE FUNCTION lockcheck_kept('${TOKENS_KEPT}');
      CREATE TRIGGER lockcheck_tokens_kept_delete BEFORE DELETE ON lockcheck_tokens FOR EACH ROW EXECUTE FUNCTION lockcheck_kept('${TOKENS_KEPT}');
      CREATE TRIGGER lockcheck_tokens_kept_truncate BEFORE TRUNCATE ON lockcheck_tokens FOR EACH STATEMENT EXECUTE FUNCTION lockcheck_kept('${TOKENS_KEPT}');
    END IF;
  EXCEPTION WHEN insufficient_privilege THEN
    -- Not the table's owner (another role made it): the lock works without the triggers, as before them.
    NULL;
  END;
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'lockcheck_store'::regclass AND tgname = 'lockcheck_store_kept') THEN
      CREATE TRIGGER lockcheck_store_kept BEFORE UPDATE ON lockcheck_store FOR EACH ROW
        WHEN (NEW.highest < OLD.highest OR NEW.resource <> OLD.resource) EXECUTE FUNCTION lockcheck_kept('${STORE_KEPT}');
      CREATE TRIGGER lockcheck_store_kept_delete BEFORE DELETE ON lockcheck_store FOR EACH ROW EXECUTE FUNCTION lockcheck_kept('${STORE_KEPT}');
      CREATE TRIGGER lockcheck_store_kept_truncate BEFORE TRUNCATE ON lockcheck_store FOR EACH STATEMENT EXECUTE FUNCTION lockcheck_kept('${STORE_KEPT}');
    END IF;
  EXCEPTION WHEN insufficient_privilege THEN
    NULL;
  END;
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
