/**
 * In-process A/B of the one-client session pair between two copies of the
 * code: `--base DIR` (a checkout's root, e.g. an earlier commit extracted
 * with `git archive <commit> impl model | tar -x -C DIR` inside this
 * repository, so that its imports resolve to the same node_modules) against
 * this tree. Both run in one process against one server, in many short
 * rounds, alternating which side goes first; per side and round: the bare
 * wire client's pair (lock-and-mint, unlock) and the session lock's
 * acquire + release, each as wall and client CPU (process.cpuUsage) per
 * pair. Reports medians and the paired per-round ratio (this tree / base):
 * on a loaded machine the pairs, not the absolute numbers, carry the signal.
 *
 *   npx tsx bench/postgresSessionAB.ts --base .scratch/base [--control .scratch/base2] [--rounds 40] [--ms 300] [--only wire,lock]
 */
import os from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PostgresServer, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { log, median, out } from './common.ts';

const args = process.argv.slice(2);
const arg = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
};
const BASE = arg('--base', '');
if (BASE === '') throw new Error('bench/postgresSessionAB.ts: --base DIR is required (a checkout of the code to compare against)');
/** A second copy of the base (`--control DIR`), measured as a third side: its ratio to the base is this run's A/A, the bias and noise the others' ratios sit in. */
const CONTROL = arg('--control', '');
const ROUNDS = Number(arg('--rounds', '40'));
const MS = Number(arg('--ms', '300'));
const ONLY = arg('--only', 'wire,lock').split(',');
const TIMEOUT_MS = 5_000;

interface Sample {
  readonly wallUs: number;
  readonly cpuUs: number;
  /** User CPU alone: the system part (the write, read and poll calls) is the same code on both sides and carries most of the load's noise. */
  readonly userUs: number;
}

type Loop = (ms: number) => Promise<number>;

/* eslint-disable @typescript-eslint/no-explicit-any -- two copies of the code, loaded by path: typed loosely on purpose */
async function side(root: string, tag: string, connection: PostgresServer['connection']): Promise<{ loops: Record<string, Loop>; close: () => Promise<void> }> {
  const url = (p: string): string => pathToFileURL(resolve(root, p)).href;
  const { PostgresSessionLock } = (await import(url('impl/postgres/sessionLock.ts'))) as any;
  const { advisoryKey } = (await import(url('impl/postgres/keys.ts'))) as any;
  const { SCHEMA, TRY_LOCK_AND_MINT } = (await import(url('impl/postgres/schema.ts'))) as any;
  const { EncodedCall, PreparedStatement, WireConnection } = (await import(url('impl/postgres/wire/connection.ts'))) as any;
  const { systemClock } = (await import(url('impl/clock.ts'))) as any;
  const lock = new PostgresSessionLock({ connection, statementTimeoutMs: TIMEOUT_MS });
  const mint = new PreparedStatement(`ab_${tag}_mint`, TRY_LOCK_AND_MINT);
  const unlock = new PreparedStatement(`ab_${tag}_unlock`, 'SELECT pg_advisory_unlock($1::bigint)');
  const wire = await WireConnection.connect({ ...connection, timeoutMs: TIMEOUT_MS, clock: systemClock, parameters: { statement_timeout: String(TIMEOUT_MS) } });
  await wire.simpleQuery(SCHEMA);
  await wire.prepare([mint, unlock]);
  const resource = `ab-wire-${tag}`;
  const key = advisoryKey(resource).toString();
  const lockResource = `ab-lock-${tag}`;
  const until = async (ms: number, pair: () => Promise<boolean>): Promise<number> => {
    let n = 0;
    for (const deadline = performance.now() + ms; performance.now() < deadline; ) if (await pair()) n++;
    return n;
  };
  // This tree's wire client may take a call encoded once (EncodedCall); an older one takes (statement, params) per call.
  const encoded = typeof EncodedCall === 'function';
  const mintCall = encoded ? new EncodedCall(mint, [key, resource, '0']) : null;
  const unlockCall = encoded ? new EncodedCall(unlock, [key]) : null;
  const wirePair = encoded
    ? async (): Promise<boolean> => (await wire.send(mintCall)).length === 1 && (await wire.send(unlockCall))[0]?.[0] === 't'
    : async (): Promise<boolean> => (await wire.call(mint, [key, resource, '0'])).length === 1 && (await wire.call(unlock, [key]))[0]?.[0] === 't';
  return {
    loops: {
      wire: (ms) => until(ms, wirePair),
      lock: (ms) =>
        until(ms, async () => {
          const r = await lock.acquire(lockResource);
          if (r.kind !== 'granted') return false;
          await lock.release(r.lease);
          return true;
        }),
    },
    close: async () => {
      await lock.close();
      await wire.end();
    },
  };
}
/* eslint-enable @typescript-eslint/no-explicit-any */

async function measure(loop: Loop): Promise<Sample> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  const n = await loop(MS);
  const wall = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { wallUs: (wall * 1000) / n, cpuUs: (used.user + used.system) / n, userUs: used.user / n };
}

const closers: (() => Promise<void>)[] = [];
try {
  log(`session A/B: ${ROUNDS} rounds of ${MS} ms · base ${BASE} · load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const server = await PostgresServer.start({ parentDir: '/dev/shm' });
  const base = await side(BASE, 'base', server.connection);
  closers.push(base.close);
  const mine = await side('.', 'mine', server.connection);
  closers.push(mine.close);
  const sides = [
    { id: 'base', s: base },
    { id: 'mine', s: mine },
  ];
  if (CONTROL !== '') {
    const control = await side(CONTROL, 'control', server.connection);
    closers.push(control.close);
    sides.push({ id: 'control', s: control });
  }
  const results: Record<string, Record<string, Sample[]>> = {};
  for (const kind of ONLY) {
    results[kind] = { base: [], mine: [], control: [] };
    // Warm both (JIT) before counting.
    for (const { s } of sides) await s.loops[kind]!(Math.min(500, MS * 2));
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const kind of ONLY) {
      for (let k = 0; k < sides.length; k++) {
        const { id, s } = sides[(k + round) % sides.length]!;
        results[kind]![id]!.push(await measure(s.loops[kind]!));
      }
    }
  }
  const load = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  out(`| ${new Date().toISOString()}, ${ROUNDS} rounds of ${MS} ms, load at end ${load} | base wall, CPU, user µs | side wall, CPU, user µs | paired ratio wall (IQR) | paired ratio CPU (IQR) | paired ratio user CPU (IQR) |`);
  out('|---|---:|---:|---:|---:|---:|');
  const q = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.floor(p * (xs.length - 1))]!;
  const f = (x: number): string => x.toFixed(1);
  const cells = (xs: Sample[]): string => `${f(median(xs.map((x) => x.wallUs)))}, ${f(median(xs.map((x) => x.cpuUs)))}, ${f(median(xs.map((x) => x.userUs)))}`;
  const ratio = (m: Sample[], b: Sample[], k: keyof Sample): string => {
    const r = m.map((x, i) => x[k] / b[i]![k]);
    return `${median(r).toFixed(3)} (${q(r, 0.25).toFixed(2)} to ${q(r, 0.75).toFixed(2)})`;
  };
  for (const kind of ONLY) {
    const b = results[kind]!.base!;
    for (const id of sides.map((x) => x.id).slice(1)) {
      const m = results[kind]![id]!;
      out(`| ${kind}: ${id === 'mine' ? 'this tree' : `${CONTROL} (control)`} / base | ${cells(b)} | ${cells(m)} | ${ratio(m, b, 'wallUs')} | ${ratio(m, b, 'cpuUs')} | ${ratio(m, b, 'userUs')} |`);
    }
  }
} finally {
  for (const close of closers) await close().catch(() => undefined);
  await stopAllPostgresServers();
}
