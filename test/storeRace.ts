/**
 * Many writers racing on a real fenced store, and what their answers must
 * show afterwards (spec FENCE-2): a seeded plan of writes with mixed tokens
 * (repeats included) on resources whose names share separators and whose
 * tokens sit near 2^53 and 2^63-1, all sent at once from several clients.
 */

import { expect } from 'vitest';
import { Random } from '../conformance/stress/random.ts';
import type { FencedStore, WriteResult } from '../impl/fencedStore.ts';

type Policy = 'strict' | 'monotonic' | 'unfenced';

/** Names that a key scheme joining with ':' or '/' (or percent-encoding) could confuse, each with its own token range. */
const RESOURCES: ReadonlyArray<{ readonly name: string; readonly base: bigint }> = [
  { name: 'a', base: 0n },
  { name: 'a:b', base: 2n ** 53n - 8n },
  { name: 'a/b', base: 2n ** 62n },
  { name: 'a%3Ab', base: 2n ** 63n - 16n },
];

interface Write {
  readonly resource: string;
  readonly token: bigint;
  readonly value: string;
}

/** `writes` writes, tokens base + [0, 15] (so repeats), in a seeded order; resource names after `prefix`. */
function plan(seed: number, writes: number, prefix: string): Write[] {
  const random = new Random(seed);
  return Array.from({ length: writes }, (_v, i) => {
    const { name, base } = random.pick(RESOURCES);
    return { resource: `${prefix}${name}`, token: base + BigInt(random.int(0, 15)), value: `w${i}` };
  });
}

/**
 * Sends the plan's writes at once, round-robin over `stores` (one per client),
 * and checks per resource: under strict no token accepted twice; every
 * refusal names a highest the policy refuses the token against, and that
 * highest is a token this resource accepted (no other resource's); the cell
 * ends with the largest token offered, and a value of a write accepted with it.
 * `prefix` starts every resource name (a store shared by several runs).
 */
export async function expectRaceJudgedRight(stores: readonly FencedStore[], policy: Policy, seed: number, prefix = '', writes = 120): Promise<void> {
  const writesPlanned = plan(seed, writes, prefix);
  const answers: WriteResult[] = await Promise.all(writesPlanned.map((w, i) => stores[i % stores.length]!.write(w.resource, w.token, w.value)));
  const reader = stores[0]!;
  for (const resource of RESOURCES) {
    const name = `${prefix}${resource.name}`;
    const mine = writesPlanned.map((w, i) => ({ ...w, answer: answers[i]! })).filter((w) => w.resource === name);
    if (mine.length === 0) continue;
    const accepted = mine.filter((w) => w.answer.kind === 'accepted');
    const acceptedTokens = new Set(accepted.map((w) => w.token));
    if (policy === 'unfenced') expect(accepted).toHaveLength(mine.length);
    if (policy === 'strict') expect(acceptedTokens.size, `${name}: a token accepted twice under strict`).toBe(accepted.length);
    for (const w of mine) {
      if (w.answer.kind !== 'rejected') continue;
      const { highest } = w.answer;
      const stale = policy === 'strict' ? w.token <= highest : w.token < highest;
      expect(stale, `${name}: ${w.token} refused against highest ${highest}`).toBe(true);
      expect(acceptedTokens.has(highest), `${name}: refused against ${highest}, which no write to it was accepted with`).toBe(true);
    }
    const largest = mine.reduce((m, w) => (w.token > m ? w.token : m), 0n);
    const read = await reader.read(name);
    if (policy !== 'unfenced') {
      expect(read.token).toBe(largest);
      expect(accepted.filter((w) => w.token === largest).map((w) => w.value)).toContain(read.value);
    }
  }
}
