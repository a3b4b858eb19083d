/**
 * The adapter for `redlock` 4.2.0 (npm; the version its `latest` tag
 * installs, the 5.x line being a beta), installed here as the alias
 * `redlock4` (`npm:redlock@4.2.0`). Checked against lockcheck's redlock
 * model on five real redis-server processes, judged by the contract of
 * redlock.js:
 * - `lock(resource, ttl)` runs one Lua script per node (EVALSHA, EVAL after
 *   NOSCRIPT; node_redis-style callbacks), counts the nodes that answered
 *   the number of keys, and grants when a quorum did and
 *   `start + ttl - (Math.round(driftFactor * ttl) + 2)` is still ahead of
 *   Date.now(): the same deadline and drift allowance as redlock 5;
 * - a failed attempt unlocks every node (compare-and-delete), then retries on
 *   a real setTimeout: the adapter runs with retryCount 0 and retries on the
 *   client's clock itself;
 * - `extend(ttl)` is the same `_lock` with the extend script: a failed
 *   extend *unlocks every node* (the attempt's failure path calls
 *   `lock.unlock`) and rejects, while the caller's Lock keeps its old
 *   `expiration`: the library still tells its caller the lease is valid, yet
 *   its keys are gone (redlock 5 leaves them; see below);
 * - node failures are emitted as `clientError` (an EventEmitter event that
 *   has no default throw); no fencing tokens; no client-side timeout; no
 *   input checks.
 *
 * On the adapter kit (redisLibraryBackend): every command the library sends
 * (`evalsha(sha, args, callback)`, `eval(args, callback)`) goes through the
 * run's faults, and its callback is called when the fault layer hands the
 * reply over; Date.now() reads the client's wall clock during its calls.
 * The adapter only watches the replies, to count each attempt's votes.
 */
import type { Redis } from 'ioredis';
// @ts-expect-error TS7016: redlock 4 ships no types; Redlock4Class below types what is used.
import Redlock4Module from 'redlock4';
import { designs } from '../../model/design.ts';
import { checkTtl } from '../../model/errors.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import type { AcquireResult, ExtendResult } from '../../impl/leaseLock.ts';
import type { BackendUnderTest, ConcurrentClient } from '../adapter.ts';
import { checkAcquireInput } from '../input.ts';
import { concurrentRedis, redisLibraryBackend } from '../kit.ts';
import type { LockCalls, RedisServerChoice } from '../kit.ts';
import { redlockKey } from './redlockLibrary.ts';
import { REDLOCK4_CONTRACT } from './contracts.ts';
import { LibraryLocks } from './libraryLocks.ts';
import { retryOnClock } from './retryOnClock.ts';

/** What of redlock 4's API the adapter uses (the package ships no types). */
interface Lock4 {
  readonly value: string;
  /** Wall-clock ms (Date.now()) until which the library considers the lock valid. */
  readonly expiration: number;
  unlock(): Promise<void>;
  extend(ttl: number): Promise<Lock4>;
}
interface Redlock4 {
  lock(resource: string, ttl: number): Promise<Lock4>;
  on(event: 'clientError', listener: (error: unknown) => void): unknown;
}
type Redlock4Class = (new (clients: unknown[], options: { driftFactor: number; retryCount: number; retryDelay: number; retryJitter: number }) => Redlock4) & {
  readonly LockError: abstract new (...args: never[]) => Error & { readonly attempts: number };
};
const Redlock4 = Redlock4Module as unknown as Redlock4Class;

export const REDLOCK4_NAME = 'redlock@4.2.0';

/** redlock 4 over 5 nodes on the kit's servers: lockcheck's own, the user's (`--redis`), or a running cluster (`choice.cluster`). */
export function redlock4Backend(choice: RedisServerChoice = {}, options: { readonly name?: string } = {}): BackendUnderTest {
  const backend = redisLibraryBackend(
    {
      name: options.name ?? `${REDLOCK4_NAME} redlock (5 nodes)`,
      design: designs.redlock({ nodes: 5 }),
      // The same promises as redlock 5 (deadline, drift allowance, no tokens, no timeout, no input checks), and its failed extend as redlock.js has it:
      // the keys deleted on every node (`_lock`'s failure path calls `lock.unlock`), the caller's Lock kept with its old expiration.
      // Declared, so the model shows what follows: another client gets the lock while the caller still holds it (MUTEX-1).
      contract: REDLOCK4_CONTRACT,
      options: { driftFactor: 0.01, retryCount: 0 },
      lockKey: redlockKey,
      client: ({ nodes, clock }) => redlock4Calls(nodes, clock),
    },
    choice,
  );
  return { ...backend, concurrent: REDLOCK4_CONCURRENT };
}

/** Each node's answer to one lock script: a vote for, a vote against (held), or no answer. */
type Vote = 'for' | 'against' | 'error';

/**
 * The connection as redlock 4 sees it: `evalsha` and `eval` with a trailing
 * callback, whose replies `onReply` sees first (each final reply, not a
 * NOSCRIPT that the library answers with EVAL).
 */
function watchedReplies(redis: Redis, onReply: (command: string, args: readonly unknown[], error: unknown, result: unknown) => void): Redis {
  return new Proxy(redis, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if ((property !== 'evalsha' && property !== 'eval') || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const callback = typeof args[args.length - 1] === 'function' ? (args.pop() as (e: Error | null, r?: unknown) => void) : null;
        const reply = (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        reply.then(
          (result) => {
            onReply(property, args, null, result);
            callback?.(null, result);
          },
          (error: unknown) => {
            onReply(property, args, error, undefined);
            callback?.(error instanceof Error ? error : new Error(String(error)));
          },
        );
        return reply;
      };
    },
  });
}

/** Counts the votes of lock-script calls (by their first argument: the script's sha, or the script itself). */
function voteCounter(): { readonly votes: Vote[]; readonly onReply: (command: string, args: readonly unknown[], error: unknown, result: unknown) => void } {
  const votes: Vote[] = [];
  return {
    votes,
    onReply: (command, args, error, result) => {
      const first = Array.isArray(args[command === 'evalsha' ? 1 : 0]) ? (args[command === 'evalsha' ? 1 : 0] as unknown[]) : [];
      const script = command === 'eval' && typeof first[0] === 'string' ? first[0] : '';
      const isLock = command === 'eval' ? script.includes('Return 0 if an entry already exists') : LOCK_SHAS.has(String(args[0]));
      if (!isLock) return;
      if (error !== null) {
        if (command === 'evalsha' && error instanceof Error && error.message.startsWith('NOSCRIPT')) return; // EVAL follows
        votes.push('error');
      } else votes.push(result === 1 || result === '1' ? 'for' : 'against');
    },
  };
}

/** The sha1 of redlock 4's lock script, read from an instance (`scripts.lockScript.hash`). */
const LOCK_SHAS = new Set<string>();
function rememberLockSha(redlock: Redlock4): void {
  const hash = (redlock as unknown as { scripts?: { lockScript?: { hash?: string } } }).scripts?.lockScript?.hash;
  if (hash !== undefined) LOCK_SHAS.add(hash);
}

/** A denial's reason from the attempt's votes, as the model names them. */
function denialOf(votes: readonly Vote[], nodes: number): AcquireResult {
  const quorum = Math.floor(nodes / 2) + 1;
  const granted = votes.filter((v) => v === 'for').length;
  const answered = votes.filter((v) => v !== 'error').length;
  return { kind: 'denied', reason: granted >= quorum ? 'validity-exhausted' : answered < quorum ? 'no-quorum' : 'held' };
}

/** One client's calls through the library (the kit runs them on the client's clocks). */
function redlock4Calls(connections: readonly Redis[], clock: MonotonicClock): LockCalls {
  const counter = voteCounter();
  const nodes = connections.slice(0, 5).map((redis) => watchedReplies(redis, counter.onReply));
  // No retries inside the library: one attempt is one vote count; the adapter retries on the client's clock.
  const redlock = new Redlock4(nodes, { driftFactor: 0.01, retryCount: 0, retryDelay: 0, retryJitter: 0 });
  rememberLockSha(redlock);
  redlock.on('clientError', () => undefined);
  const locks = new LibraryLocks<Lock4>();
  const deadline = (lock: Lock4): number => clock.now() + (lock.expiration - Date.now());
  const attempt = async (resource: string, ttlMs: number): Promise<AcquireResult> => {
    counter.votes.length = 0;
    try {
      const lock = await redlock.lock(redlockKey(resource), ttlMs);
      return locks.granted(new LeaseHandle(resource, lock.value, 0n, deadline(lock), clock), lock);
    } catch (error) {
      if (!(error instanceof Redlock4.LockError)) throw error;
      return denialOf(counter.votes.slice(0, 5), 5);
    }
  };
  return {
    async acquire(resource, { ttlMs, retries = 0, retryDelayMs = 0 }) {
      checkAcquireInput(resource, { ttlMs, retries }, true);
      return retryOnClock(clock, retries, retryDelayMs, () => attempt(resource, ttlMs));
    },
    async extend(lease, ttlMs): Promise<ExtendResult> {
      checkTtl(ttlMs);
      const held = locks.get(lease);
      if (held === undefined) return { kind: 'not-extended', reason: 'expired' };
      try {
        const lock = await held.lock.extend(ttlMs);
        const validUntilMs = deadline(lock);
        held.handle.extendTo(validUntilMs);
        return { kind: 'extended', validUntilMs };
      } catch (error) {
        if (!(error instanceof Redlock4.LockError)) throw error;
        // attempts 0: found expired by its own clock before sending anything. Otherwise its keys were
        // unlocked on every node, but the caller's Lock keeps its expiration: the lease stays as the library reports it.
        return { kind: 'not-extended', reason: error.attempts === 0 ? 'expired' : 'no-quorum' };
      }
    },
    async release(lease) {
      const lock = locks.end(lease, 'released');
      if (lock === undefined) return;
      // Rejects when no quorum released; the keys then expire by their ttl.
      await lock.unlock().catch(() => undefined);
    },
  };
}

/**
 * redlock 4 in a concurrent run, as its README has it: one Redlock over five
 * connections (2 s command timeouts), a `clientError` listener, no retries
 * of its own (the workload backs off), real time; the deadline is
 * `lock.expiration` on the shared monotonic clock.
 */
export const REDLOCK4_CONCURRENT: ConcurrentClient = {
  servers: { kind: 'redis', nodes: 5 },
  lockKey: redlockKey,
  tokens: false,
  async connect(servers, clock) {
    const connections = await Promise.all(servers.redis.map(concurrentRedis));
    const counter = voteCounter();
    const nodes = connections.map((redis) => watchedReplies(redis, counter.onReply));
    const redlock = new Redlock4(nodes, { driftFactor: 0.01, retryCount: 0, retryDelay: 0, retryJitter: 0 });
    rememberLockSha(redlock);
    redlock.on('clientError', () => undefined);
    const locks = new LibraryLocks<Lock4>();
    return {
      async acquire(resource, ttlMs) {
        counter.votes.length = 0;
        try {
          const lock = await redlock.lock(redlockKey(resource), ttlMs);
          return locks.granted(new LeaseHandle(resource, lock.value, 0n, clock.now() + (lock.expiration - Date.now()), clock), lock);
        } catch (error) {
          if (!(error instanceof Redlock4.LockError)) throw error;
          return denialOf(counter.votes.slice(0, 5), 5);
        }
      },
      async release(lease) {
        const lock = locks.end(lease, 'released');
        if (lock === undefined) return;
        await lock.unlock();
      },
      async close() {
        for (const c of connections) c.disconnect();
      },
    };
  },
};

/** `lockcheck run --backend ./conformance/adapters/redlock4.ts [--redis …]` (five nodes); `lockcheck stress` takes `concurrent`. */
export default (choice: RedisServerChoice = {}): BackendUnderTest => redlock4Backend(choice);
export const concurrent = REDLOCK4_CONCURRENT;
