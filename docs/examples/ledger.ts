/**
 * The article's ledger, as a small library: a transfer between two accounts
 * under PostgreSQL transaction-scoped advisory locks, with an audit row that
 * carries the lease's fencing token.
 *
 * The data code is deliberately naive: it reads both balances (no FOR
 * UPDATE), computes the new ones in the application, and writes them back as
 * absolute values (`SET balance = $computed`). Two such transactions that
 * overlap lose an update; `unlockedTransfer` does exactly that and is the
 * negative control. `transfer` runs the same statements while holding both
 * accounts' advisory locks, so they never overlap, and nothing is lost.
 *
 * Locking: the lower account id's lock is taken by
 * PostgresTransactionLock.withLock (which also mints the lease's token), the
 * higher one with pg_advisory_xact_lock in the same transaction, right after.
 * Every transfer takes its two locks in ascending id order, so two transfers
 * never wait for each other in a cycle. Both locks are released by the
 * transaction's COMMIT or ROLLBACK, together with the data changes.
 */
import pg from 'pg';
// The package's own entries, as in your project (in lockcheck's repository they resolve to its sources: tsconfig.json paths, vitest.config.ts, cli/lockcheck.mjs).
import { InvalidInputError, MAX_TOKEN } from 'lockcheck/model';
import { advisoryKey, PostgresTransactionLock } from 'lockcheck/postgres';
import type { Queryable } from 'lockcheck/postgres';
import { LockNotAcquiredError } from 'lockcheck/lock';

export interface LedgerOptions {
  /** The lock client to use. Default: a new one on `connection`, closed by close(). A lock passed in is not closed. */
  readonly lock?: PostgresTransactionLock;
  /** How long a transfer waits for each account lock (lock_timeout), in ms. Default 5000. */
  readonly waitMs?: number;
}

export interface TransferHooks {
  /** Called after both balances were read and before anything is written (tests use it to force interleavings and pauses). */
  readonly afterRead?: () => Promise<void>;
}

export type TransferResult = 'done' | 'insufficient';

export interface AuditRow {
  readonly from: number;
  readonly to: number;
  readonly amount: bigint;
  /** The fencing token of the lower account id's lock (0 for an unlocked transfer). */
  readonly token: bigint;
}

export interface Ledger {
  /** Creates the tables if needed and resets them to exactly these accounts (the audit log is emptied). */
  setup(accounts: Array<{ id: number; balance: bigint }>): Promise<void>;
  /** Moves `amount` from `from` to `to` under both accounts' locks; 'insufficient' (and no change) when `from` has less. */
  transfer(from: number, to: number, amount: bigint, hooks?: TransferHooks): Promise<TransferResult>;
  balances(): Promise<Map<number, bigint>>;
  /** The audit log in insertion (ledger_audit.id) order. */
  audit(): Promise<AuditRow[]>;
  close(): Promise<void>;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS ledger_accounts (
  id int PRIMARY KEY,
  balance bigint NOT NULL CHECK (balance >= 0)
);
CREATE TABLE IF NOT EXISTS ledger_audit (
  id bigserial PRIMARY KEY,
  from_id int,
  to_id int,
  amount bigint,
  token bigint
);
`;

const TIMEOUT_MS = 5000;
const INT4_MIN = -(2 ** 31);
const INT4_MAX = 2 ** 31 - 1;

export const accountResource = (id: number): string => `ledger:account:${id}`;

function checkAccountId(id: unknown, what: string): number {
  if (typeof id !== 'number' || !Number.isInteger(id) || id < INT4_MIN || id > INT4_MAX) {
    throw new InvalidInputError('precondition', `${what} must be an integer account id (int4), got ${String(id)}`);
  }
  return id;
}

function checkTransfer(from: unknown, to: unknown, amount: unknown): void {
  checkAccountId(from, 'from');
  checkAccountId(to, 'to');
  if (from === to) throw new InvalidInputError('precondition', 'from and to must be different accounts');
  if (typeof amount !== 'bigint' || amount <= 0n || amount > MAX_TOKEN) {
    throw new InvalidInputError('precondition', `amount must be a positive bigint of at most 2^63-1, got ${typeof amount === 'bigint' ? amount.toString() : typeof amount}`);
  }
}

/** A short-lived connection with every wait bounded; `fn` runs on it, then it is closed. */
async function withClient<T>(connection: pg.ClientConfig, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({
    connectionTimeoutMillis: TIMEOUT_MS,
    statement_timeout: TIMEOUT_MS,
    query_timeout: TIMEOUT_MS,
    ...connection,
  });
  // A connection failure surfaces as the next query's error; never as an unhandled 'error' event.
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * The naive read-compute-write, on `tx` (inside a transaction). Not safe on
 * its own: two overlapping calls lose an update.
 */
async function readComputeWrite(tx: Queryable, from: number, to: number, amount: bigint, token: bigint, hooks: TransferHooks | undefined): Promise<TransferResult> {
  const r = await tx.query<{ id: number; balance: string }>('SELECT id, balance::text AS balance FROM ledger_accounts WHERE id = ANY($1::int[])', [[from, to]]);
  const balance = new Map(r.rows.map((row) => [row.id, BigInt(row.balance)]));
  const fromBalance = balance.get(from);
  const toBalance = balance.get(to);
  if (fromBalance === undefined || toBalance === undefined) {
    throw new InvalidInputError('precondition', `unknown account ${fromBalance === undefined ? from : to}`);
  }
  await hooks?.afterRead?.();
  if (fromBalance < amount) return 'insufficient';
  await tx.query('UPDATE ledger_accounts SET balance = $2::bigint WHERE id = $1', [from, (fromBalance - amount).toString()]);
  await tx.query('UPDATE ledger_accounts SET balance = $2::bigint WHERE id = $1', [to, (toBalance + amount).toString()]);
  await tx.query('INSERT INTO ledger_audit (from_id, to_id, amount, token) VALUES ($1, $2, $3::bigint, $4::bigint)', [from, to, amount.toString(), token.toString()]);
  return 'done';
}

export function createLedger(connection: pg.ClientConfig, options: LedgerOptions = {}): Ledger {
  const waitMs = options.waitMs ?? 5000;
  if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > INT4_MAX) throw new InvalidInputError('invalid-duration', 'waitMs must be an integer in [0, 2^31-1]');
  const ownsLock = options.lock === undefined;
  const lock = options.lock ?? new PostgresTransactionLock({ connection });

  return {
    async setup(accounts) {
      const ids = new Set<number>();
      for (const a of accounts) {
        checkAccountId(a.id, 'id');
        if (ids.has(a.id)) throw new InvalidInputError('precondition', `account ${a.id} listed twice`);
        ids.add(a.id);
        if (typeof a.balance !== 'bigint' || a.balance < 0n || a.balance > MAX_TOKEN) throw new InvalidInputError('precondition', `balance of ${a.id} must be a bigint in [0, 2^63-1]`);
      }
      await withClient(connection, async (client) => {
        await client.query(SCHEMA);
        await client.query('BEGIN');
        try {
          await client.query('TRUNCATE ledger_accounts, ledger_audit RESTART IDENTITY');
          for (const a of accounts) await client.query('INSERT INTO ledger_accounts (id, balance) VALUES ($1, $2::bigint)', [a.id, a.balance.toString()]);
          await client.query('COMMIT');
        } catch (e) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw e;
        }
      });
    },

    async transfer(from, to, amount, hooks) {
      checkTransfer(from, to, amount);
      const [low, high] = from < to ? [from, to] : [to, from];
      return lock.withLock(accountResource(low), waitMs, async (tx, lease) => {
        // Second lock, same transaction, same lock_timeout (withLock's SET LOCAL).
        try {
          await tx.query('SELECT pg_advisory_xact_lock($1::bigint)', [advisoryKey(accountResource(high)).toString()]);
        } catch (e) {
          if ((e as { code?: string }).code === '55P03') throw new LockNotAcquiredError(accountResource(high), 'held');
          throw e;
        }
        return readComputeWrite(tx, from, to, amount, lease.token, hooks);
      });
    },

    balances() {
      return withClient(connection, async (client) => {
        const r = await client.query<{ id: number; balance: string }>('SELECT id, balance::text AS balance FROM ledger_accounts ORDER BY id');
        return new Map(r.rows.map((row) => [row.id, BigInt(row.balance)]));
      });
    },

    audit() {
      return withClient(connection, async (client) => {
        const r = await client.query<{ from_id: number; to_id: number; amount: string; token: string }>(
          'SELECT from_id, to_id, amount::text AS amount, token::text AS token FROM ledger_audit ORDER BY id',
        );
        return r.rows.map((row) => ({ from: row.from_id, to: row.to_id, amount: BigInt(row.amount), token: BigInt(row.token) }));
      });
    },

    async close() {
      if (ownsLock) await lock.close();
    },
  };
}

/**
 * The negative control: the same statements as `transfer`, in a plain
 * transaction without any lock. Two overlapping calls lose an update. The
 * audit row's token is 0 (there is no lease).
 */
export async function unlockedTransfer(connection: pg.ClientConfig, from: number, to: number, amount: bigint, hooks?: TransferHooks): Promise<TransferResult> {
  checkTransfer(from, to, amount);
  return withClient(connection, async (client) => {
    await client.query('BEGIN');
    try {
      const result = await readComputeWrite(client, from, to, amount, 0n, hooks);
      await client.query('COMMIT');
      return result;
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    }
  });
}
