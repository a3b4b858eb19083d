/**
 * Client CPU of LeaseLock itself, without a server: 50 concurrent
 * acquire+release loops over in-memory nodes that answer at once (a resolved
 * promise per call), against the node calls alone. What is left is the
 * lock's own cost per pair (rounds, timers, votes, leases). No server, no
 * network: quick and little disturbed by other load.
 *
 *   npx tsx bench/leaseLockCpu.ts [--seconds N]
 */
import { LeaseLock } from '../impl/leaseLock.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';
import { systemClock } from '../impl/clock.ts';
import { fmtRate, log, median, out, parseSeconds } from './common.ts';

/** Keys in a Map, answering at once: a node as cheap as a node can be. */
function memoryNode(): LeaseNode {
  const held = new Map<string, string>();
  const counters = new Map<string, bigint>();
  return {
    acquire: (resource, owner) => {
      if (held.has(resource)) return Promise.resolve(null);
      held.set(resource, owner);
      const token = (counters.get(resource) ?? 0n) + 1n;
      counters.set(resource, token);
      return Promise.resolve(token);
    },
    release: (resource, owner) => {
      if (held.get(resource) !== owner) return Promise.resolve(false);
      held.delete(resource);
      return Promise.resolve(true);
    },
    extend: (resource, owner) => Promise.resolve(held.get(resource) === owner),
    raiseToken: (resource, token) => {
      if ((counters.get(resource) ?? 0n) < token) counters.set(resource, token);
      return Promise.resolve();
    },
  };
}

type Pair = (loop: number) => Promise<void>;

async function cpuPerPair(pair: Pair, ms: number): Promise<number> {
  let n = 0;
  const cpu = process.cpuUsage();
  const until = performance.now() + ms;
  await Promise.all(
    Array.from({ length: 50 }, async (_, i) => {
      while (performance.now() < until) {
        await pair(i);
        n++;
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  return (used.user + used.system) / n;
}

const seconds = parseSeconds('bench/leaseLockCpu.ts', process.argv.slice(2));
out('| nodes | LeaseLock µs/pair | node calls alone µs/pair | LeaseLock\'s own cost µs/pair |');
out('|---:|---:|---:|---:|');
for (const count of [1, 5]) {
  const nodes = Array.from({ length: count }, memoryNode);
  const lock = new LeaseLock({ nodes, clock: systemClock });
  const viaLock: Pair = async (i) => {
    const r = await lock.acquire(`r${i}`, { ttlMs: 10_000 });
    if (r.kind !== 'granted') throw new Error(`not granted: ${r.kind}`);
    await lock.release(r.lease);
  };
  let owner = 0;
  const alone: Pair = async (i) => {
    const o = String(owner++);
    await Promise.all(nodes.map((n) => n.acquire(`a${i}`, o, 10_000)));
    await Promise.all(nodes.map((n) => n.release(`a${i}`, o)));
  };
  const a: number[] = [];
  const b: number[] = [];
  await cpuPerPair(viaLock, 300);
  await cpuPerPair(alone, 300);
  for (let round = 0; round < 3; round++) {
    a.push(await cpuPerPair(viaLock, (seconds * 1000) / 3));
    b.push(await cpuPerPair(alone, (seconds * 1000) / 3));
  }
  await lock.settled();
  out(`| ${count} | ${median(a).toFixed(2)} | ${median(b).toFixed(2)} | ${fmtRate(median(a) - median(b))} (${(median(a) - median(b)).toFixed(2)}) |`);
  log(`  ${count} node(s): rounds ${a.map((x) => x.toFixed(2)).join(', ')} vs ${b.map((x) => x.toFixed(2)).join(', ')}`);
}
