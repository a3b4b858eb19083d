import type { Command } from './command.ts';
import { hasTtl, rulesOf } from './design.ts';
import type { PackedBranches } from './packedBranches.ts';
import { UNCHANGED } from './packedBranches.ts';
import { packedAcquire } from './packedAcquire.ts';
import { packedDeliver, packedExtend, packedPauseWrite, packedRead, packedRelease, packedResume, packedWrite } from './packedOps.ts';
import type { PackedLayout } from './packed.ts';
import {
  C_MONO_ANCHOR,
  clientAt,
  COUNTER_STRIDE,
  K_EXPIRES,
  K_PRESENT,
  KEY_STRIDE,
  N_CUT,
  N_DELAY_KIND,
  N_DELAY_MS,
  N_HAS_REPLICA,
  N_KEYS,
  N_MONO_ANCHOR,
  N_UP,
  N_WALL_ANCHOR,
  nodeAt,
  replicaAt,
} from './packed.ts';
import type { PackedContext } from './packedFingerprint.ts';
import { expiryAt, readAt } from './packedFingerprint.ts';
import { removeKeyAt } from './packedNode.ts';
import type { World } from './state.ts';

/**
 * The explorer's packed step: the faults of model/world.ts's inject() that
 * raise no event, on a packed state (packed.ts), each branch written into a
 * reused buffer: no object, no string, no exception per transition. The
 * branches come in the reference step's order (stepOrbits), so a branch
 * index means the same in both. model/world.ts stays the semantics; the
 * equivalence test (test/packedStep.test.ts) holds this to it. Commands not
 * packed here, and every operation, take the reference step.
 */

export { UNCHANGED } from './packedBranches.ts';
export { FALLBACK } from './packedOps.ts';

/**
 * Whether the packed step computes `command` for explorations from
 * `initial` (a packable design: packed.ts's layoutFor). Kept to the
 * faults whose reference branches carry no event: an event needs the
 * reference step's World for the property checks.
 */
export function packs(initial: World, command: Command): boolean {
  switch (command.kind) {
    case 'advance':
    case 'partition':
    case 'heal':
    case 'node-delay':
    case 'clock-drift':
    case 'clock-step':
      return true;
    case 'crash':
      return rulesOf(initial.config.design).onCrash === 'keep';
    case 'replicate':
      return true;
    case 'acquire': {
      // A consensus lock (etcd) sends its put only once it has read its lease's grant (world.ts, acquireLease): not packed.
      const design = initial.config.design;
      return hasTtl(design) && rulesOf(design).acquireFirstRound(design) === 'put' && (command.retries ?? 0) === 0;
    }
    case 'extend':
    case 'release':
    case 'write':
    case 'read':
      return packsExtend(initial);
    case 'pause':
      // A pause holding an extension (the timing class) or a write (client-pause); any other operation takes the reference step.
      return (command.inFlight === undefined || command.inFlight.kind === 'extend') && packsExtend(initial);
    case 'resume':
      // Per state: packedResume answers FALLBACK where it does not compute the resume.
      return packsExtend(initial);
    case 'deliver':
      return packsExtend(initial);
    case 'restart':
    case 'kill-connection':
      return false;
  }
}

/** The ttl designs whose writes go straight to the store: their extend, release, write and read pack. */
function packsExtend(initial: World): boolean {
  return hasTtl(initial.config.design) && rulesOf(initial.config.design).writes === 'direct';
}

/** Sets a clock (three numbers at `at`) to run at `drift` from true time `now` on, its reading continuous (clock.ts's setDrift). */
function setDriftAt(w: Float64Array, at: number, now: number, drift: number): void {
  const reading = readAt(w, at, now);
  w[at] = now;
  w[at + 1] = reading;
  w[at + 2] = drift;
}

/**
 * Steps `command` (one `packs` accepts, enabled in `w`) from the packed
 * state `w`, writing its branches into `out`. Returns how many, UNCHANGED,
 * or FALLBACK (a resume this state does not pack: take the reference step).
 */
export function packedStep(ctx: PackedContext, w: Float64Array, command: Command, out: PackedBranches): number {
  out.clear();
  switch (command.kind) {
    case 'acquire':
      packedAcquire(ctx, w, command.client, ctx.layout.resources.indexOf(command.resource), command.ttlMs!, command.latencyMs ?? 0, out);
      return out.count;
    case 'extend':
      return packedExtend(ctx, w, command.client, ctx.layout.resources.indexOf(command.resource), command.ttlMs, command.latencyMs ?? 0, false, out);
    case 'pause': {
      const op = command.inFlight;
      if (op === undefined) return packedPauseWrite(ctx, w, command.client, command.pendingWrite === undefined ? -1 : ctx.layout.resources.indexOf(command.pendingWrite.resource), out);
      if (op.kind !== 'extend') throw new RangeError('the packed step computes a pause only with an extend in flight');
      return packedExtend(ctx, w, command.client, ctx.layout.resources.indexOf(op.resource), op.ttlMs, op.latencyMs ?? 0, true, out);
    }
    case 'deliver':
      return packedDeliver(ctx, w, command.client, out);
    case 'resume':
      return packedResume(ctx, w, command.client, out);
    case 'release':
      return packedRelease(ctx, w, command.client, ctx.layout.resources.indexOf(command.resource), command.latencyMs ?? 0, out);
    case 'write':
      return packedWrite(ctx, w, command.client, ctx.layout.resources.indexOf(command.resource), command.latencyMs ?? 0, command.delayed === true, out);
    case 'read':
      return packedRead(ctx, w, out);
    default:
      return packedFault(ctx, w, command, out);
  }
}

function packedFault(ctx: PackedContext, w: Float64Array, command: Command, out: PackedBranches): number {
  const l: PackedLayout = ctx.layout;
  const now = w[0]!;
  switch (command.kind) {
    case 'advance':
      out.push(w)[0] = now + command.ms;
      return 1;
    case 'partition': {
      const at = nodeAt(l, command.node) + N_CUT;
      const bit = 1 << command.client;
      // The reference keeps the very world when the link is cut already.
      if ((w[at]! & bit) !== 0) return UNCHANGED;
      const first = out.push(w);
      first[at] = (w[at]! | bit) >>> 0;
      return 1;
    }
    case 'heal': {
      const at = nodeAt(l, command.node) + N_CUT;
      const first = out.push(w);
      first[at] = (w[at]! & ~(1 << command.client)) >>> 0;
      return 1;
    }
    case 'node-delay': {
      const at = nodeAt(l, command.node);
      const first = out.push(w);
      first[at + N_DELAY_KIND] = command.ms === 0 ? 0 : command.ms === 'never' ? 2 : 1;
      first[at + N_DELAY_MS] = typeof command.ms === 'number' ? command.ms : 0;
      return 1;
    }
    case 'clock-drift': {
      const first = out.push(w);
      const t = command.target;
      if ('node' in t) {
        const at = nodeAt(l, t.node);
        setDriftAt(first, at + N_WALL_ANCHOR, now, command.driftPpm);
        setDriftAt(first, at + N_MONO_ANCHOR, now, command.driftPpm);
      } else setDriftAt(first, clientAt(l, t.client) + C_MONO_ANCHOR, now, command.driftPpm);
      return 1;
    }
    case 'clock-step': {
      const at = nodeAt(l, command.node);
      const expiry = expiryAt(ctx, w, at, now);
      const wall = at + N_WALL_ANCHOR;
      const reading = readAt(w, wall, now) + command.deltaMs;
      // Keys dead on the node whatever the tolerance (liveness() is [false]): purged or not before the step, a branch each.
      let dead = false;
      for (let r = 0; r < l.resources.length; r++) {
        const k = at + N_KEYS + r * KEY_STRIDE;
        const e = w[k + K_EXPIRES]!;
        if (w[k + K_PRESENT] === 1 && !Number.isNaN(e) && expiry > e + ctx.toleranceMs) dead = true;
      }
      const branches = dead ? 2 : 1;
      for (let b = 0; b < branches; b++) {
        const o = out.push(w);
        o[wall] = now;
        o[wall + 1] = reading;
        if (b === 1 || !dead) continue;
        for (let r = 0; r < l.resources.length; r++) {
          const k = at + N_KEYS + r * KEY_STRIDE;
          const e = w[k + K_EXPIRES]!;
          if (w[k + K_PRESENT] === 1 && !Number.isNaN(e) && expiry > e + ctx.toleranceMs) removeKeyAt(ctx, o, command.node, r);
        }
      }
      return branches;
    }
    case 'crash':
      // 'keep' (packs): the node goes down with its keys; a session-bound design never packs.
      out.push(w)[nodeAt(l, command.node) + N_UP] = 0;
      return 1;
    case 'replicate': {
      const at = nodeAt(l, command.node);
      const first = out.push(w);
      if (w[at + N_HAS_REPLICA] === 1 && w[at + N_UP] === 1) {
        const size = l.resources.length * KEY_STRIDE + l.counters.length * COUNTER_STRIDE;
        first.copyWithin(replicaAt(l, at), at + N_KEYS, at + N_KEYS + size);
      }
      return 1;
    }
    default:
      throw new RangeError(`the packed step does not compute '${command.kind}'`);
  }
}
