import { match } from 'ts-pattern';
import type { Lease } from '../../impl/lease.ts';
import { LeaseLostError } from '../../impl/errors.ts';
import type { OperationEvent, WriteEvent } from '../history/event.ts';
import type { RecordedEvent } from './protocol.ts';
import type { StressClient } from './client.ts';
import type { ClientConfig, GateRequest } from './protocol.ts';
import { Random } from './random.ts';
import { sharedNowMs } from './sharedClock.ts';
import { AdapterBreach, CALL_GUARD_MS } from './adapterBreach.ts';

/**
 * The Jepsen-style workload of one client process: acquire a random
 * resource with a random ttl, read-modify-write the register it guards,
 * release; record every step. A careful client: it checks that its lease is
 * still valid before the read and before the write (a pause between that
 * check and the write is what the nemesis exploits).
 *
 * Events are buffered and handed to `emit` before each call to the client
 * (and before a gate, and at the end of each cycle): whatever happens to
 * this process during a call (killed, paused past the run's end, the run
 * interrupted), the runner already has the call's invoke and all that came
 * before it, so the call is pending in the history, never missing (a grant
 * or a write missing made another client's read of it a violation). A
 * pg-xact write's completion waits for the outcome its COMMIT decided.
 */
export interface WorkloadIo {
  emit(events: readonly RecordedEvent[]): void;
  /** Waits for the runner to open the gate before the write (targeted nemesis). */
  gate(request: GateRequest): Promise<void>;
  stopping(): boolean;
}

/** Pause after a denied acquire, at most (random, so that contenders spread out). */
const BACKOFF_MAX_MS = 4;

export async function runWorkload(config: ClientConfig, client: StressClient, io: WorkloadIo): Promise<number> {
  const random = new Random(config.seed);
  const w = config.workload;
  const p = config.process;
  const ttl = config.backend.kind === 'redis' || config.backend.kind === 'redis-sentinel' || config.backend.kind === 'etcd' || config.backend.kind === 'zookeeper' || (config.backend.kind === 'adapter' && config.backend.servers.redis.length > 0);
  const fenced = config.backend.kind !== 'pg-xact' && config.backend.storePolicy !== 'unfenced';
  const tokens = config.backend.kind !== 'adapter' || config.backend.tokens;
  let buffer: RecordedEvent[] = [];
  const record = (e: Unstamped<OperationEvent>): void => {
    buffer.push({ ...e, process: p, time: sharedNowMs() } as OperationEvent);
  };
  const flush = (): void => {
    if (buffer.length > 0) io.emit(buffer);
    buffer = [];
  };
  /** Every call to the client goes through here: what is recorded so far leaves before its request does. */
  const call = <T>(op: string, start: () => Promise<T>): Promise<Guarded<T>> => {
    flush();
    return guarded(start(), guard, op);
  };
  const guard: { tripped: string | null } = { tripped: null };
  let cycles = 0;
  for (; cycles < w.maxCycles && sharedNowMs() < w.untilMs && !io.stopping() && guard.tripped === null; cycles++) {
    const resource = `${w.prefix}r${random.int(0, w.resources - 1)}`;
    const ttlMs = random.int(w.ttlMinMs, w.ttlMaxMs);
    const acquireInvokedAt = sharedNowMs();
    record({ type: 'invoke', op: 'acquire', resource, ...(ttl ? { ttlMs } : {}) });
    const acquired = await call('acquire', () => client.acquire(resource, ttlMs));
    if (acquired.kind === 'error') {
      record({ type: 'info', op: 'acquire', resource, reason: acquired.message });
      flush();
      continue;
    }
    const lease = match(acquired.value)
      .with({ kind: 'granted' }, (g) => g.lease)
      .with({ kind: 'denied' }, (d) => {
        record({ type: 'fail', op: 'acquire', resource, reason: d.reason });
        return null;
      })
      .with({ kind: 'timed-out' }, () => {
        record({ type: 'info', op: 'acquire', resource, reason: 'timeout' });
        return null;
      })
      .exhaustive();
    if (lease === null) {
      flush();
      await sleepMs(random.int(0, BACKOFF_MAX_MS));
      continue;
    }
    // A lock without fencing tokens (a library's) records none: FENCE-1 then has nothing to judge.
    const held = { resource, owner: lease.owner, ...(tokens ? { token: lease.token.toString() } : {}) };
    record({ type: 'ok', op: 'acquire', ...held, ...(lease.validUntilMs !== null ? { validUntil: lease.validUntilMs } : {}) });
    watchSignal(lease, p, tokens, (e) => buffer.push(e));

    let write: { readonly base: Omit<WriteEvent, 'type' | 'time'>; outcome: 'ok' | 'fail' | 'info'; readonly reason?: string; readonly time: number } | null = null;
    if (!lease.signal.aborted) {
      record({ type: 'invoke', op: 'read', resource, key: resource });
      const read = await call('read', () => client.read(lease));
      if (read.kind === 'error') record({ type: 'info', op: 'read', resource, key: resource, reason: read.message });
      else record({ type: 'ok', op: 'read', resource, key: resource, value: read.value });
      if (read.kind === 'ok' && !lease.signal.aborted) {
        if (w.gate) {
          flush();
          await io.gate({ kind: 'gate', ...held, token: held.token ?? 'none', ...(lease.validUntilMs !== null ? { validUntil: lease.validUntilMs } : {}), pids: client.pids(), acquireInvokedAt });
        }
        const value = `${p}.${cycles}`;
        const base = { op: 'write' as const, process: p, resource, key: resource, value, prev: read.value, ...(fenced && held.token !== undefined ? { token: held.token } : {}) };
        buffer.push({ ...base, type: 'invoke', time: sharedNowMs() });
        const written = await call('write', () => client.write(lease, value));
        write = {
          base,
          time: sharedNowMs(),
          ...(written.kind === 'error' ? { outcome: 'info' as const, reason: written.message } : written.value === 'accepted' ? { outcome: 'ok' as const } : { outcome: 'fail' as const, reason: 'stale-token' }),
        };
      }
    }
    // pg-xact: the write is in the store only if its transaction commits with the release.
    const lostBeforeRelease = lease.signal.aborted && reasonOf(lease) === 'connection-lost';
    /** The write's completion (its invoke was recorded before the call). */
    const writeDone = (committed: boolean): RecordedEvent[] => {
      if (write === null) return [];
      let outcome = write.outcome;
      if (config.backend.kind === 'pg-xact' && outcome === 'ok' && !committed) outcome = lostBeforeRelease ? 'fail' : 'info';
      if (config.backend.kind === 'pg-xact' && outcome === 'info' && lostBeforeRelease) outcome = 'fail';
      return [{ ...write.base, type: outcome, time: write.time, ...(outcome !== 'ok' ? { reason: write.reason ?? (lostBeforeRelease ? 'transaction-lost' : 'commit-unknown') } : {}) }];
    };
    if (config.backend.kind !== 'pg-xact') buffer.push(...writeDone(true));
    buffer.push({ type: 'invoke', op: 'release', process: p, time: sharedNowMs(), ...held });
    const released = await call('release', () => client.release(lease));
    const releaseDone: OperationEvent =
      released.kind === 'error'
        ? { type: 'info', op: 'release', process: p, time: sharedNowMs(), ...held, reason: released.message }
        : { type: 'ok', op: 'release', process: p, time: sharedNowMs(), ...held };
    if (config.backend.kind === 'pg-xact') buffer.push(...writeDone(released.kind === 'ok' && released.value));
    buffer.push(releaseDone);
    flush();
    if (guard.tripped !== null) break;
  }
  flush();
  if (guard.tripped !== null) {
    // Its call is in the history as an unknown outcome; the process's state is unknown, so it stops, and says so.
    const message = `${guard.tripped} had no answer within ${CALL_GUARD_MS} ms: the client stopped (its state unknown)`;
    throw config.backend.kind === 'adapter' ? new AdapterBreach(`${message}; every call of an adapter must settle (docs/adapter.md)`) : new Error(message);
  }
  return cycles;
}

/** Records the lease's signal when it fires for any reason but its release (the release's invoke already ends the hold). */
function watchSignal(lease: Lease, p: number, tokens: boolean, push: (e: RecordedEvent) => void): void {
  const signal = lease.signal;
  const fire = (): void => {
    const reason = reasonOf(lease);
    if (reason === 'released') return;
    push({ type: 'signal', process: p, time: sharedNowMs(), resource: lease.resource, owner: lease.owner, ...(tokens ? { token: lease.token.toString() } : {}), reason });
  };
  if (signal.aborted) fire();
  else signal.addEventListener('abort', fire, { once: true });
}

function reasonOf(lease: Lease): string {
  const r: unknown = lease.signal.reason;
  return r instanceof LeaseLostError ? r.reason : 'lost';
}

/** An event before the process and the time are stamped on it. */
type Unstamped<E> = E extends unknown ? Omit<E, 'process' | 'time'> : never;

type Guarded<T> = { readonly kind: 'ok'; readonly value: T } | { readonly kind: 'error'; readonly message: string };

/** The call's outcome, or its error as a short reason; bounded by CALL_GUARD_MS (past it `run.tripped`: the process's state is unknown, so the workload stops). */
async function guarded<T>(call: Promise<T>, run: { tripped: string | null }, op: string): Promise<Guarded<T>> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<Guarded<T>>((resolve) => {
    timer = setTimeout(() => {
      run.tripped = op;
      resolve({ kind: 'error', message: `guard: no answer within ${CALL_GUARD_MS} ms` });
    }, CALL_GUARD_MS);
  });
  try {
    return await Promise.race([
      call.then(
        (value) => ({ kind: 'ok' as const, value }),
        (e: unknown) => {
          // The adapter's own error ends the client (the worker reports it); a library's failure is an unknown outcome.
          if (e instanceof AdapterBreach) throw e;
          return { kind: 'error' as const, message: e instanceof Error ? e.message.split('\n')[0]!.slice(0, 200) : String(e) };
        },
      ),
      guard,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function sleepMs(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}
