import { ConfigurationCache } from './cache.ts';
import { buildEntries, NIL as NIL_ENTRY, RETURN as RETURN_ENTRY, type EntryList } from './entries.ts';
import { illegal, type Model } from './model.ts';
import { isPending, type Operation } from './operation.ts';

export type SearchStatus = 'running' | 'linearizable' | 'not-linearizable';

/**
 * The Wing–Gong–Lowe search over one partition, resumable so that several
 * partitions can share a time budget and a deadline can stop it.
 *
 * Depth first: walk the entry list from its head; a call entry whose
 * operation the model accepts in the current state is linearized (lifted out
 * of the list with its return, the search restarts from the head); reaching
 * a return entry means its operation had to be linearized before it, so the
 * last choice is undone. Configurations (linearized set, state) already
 * explored are skipped (Lowe). The set's hash is kept incrementally (Zobrist:
 * one random word per operation, xor-ed in and out), so a step costs O(1)
 * hashing plus the model's. An unknown operation whose relevance the model
 * bounds has an optional return entry: reaching it unplaced, the search
 * drops the operation (a forced step, undone on backtracking like a
 * placement), so it stops being a candidate once it can no longer matter.
 */
export class PartitionSearch<S, I, O> {
  status: SearchStatus = 'running';
  /** Loop iterations so far. */
  steps = 0;
  /**
   * The deepest stack seen (its entries and drop flags, `bestSp` of them):
   * the longest sequence linearized at once, the full order when
   * linearizable. Copied incrementally: positions below `lowWater` (the
   * lowest the stack fell since the last copy) have not changed since, so a
   * copy costs the pushes since the last one, not the stack's depth (a
   * history failing a little deeper at each of n blocks copied n stacks).
   */
  private readonly bestEntry: Int32Array;
  private readonly bestDropped: Uint8Array;
  private bestSp = 0;
  /** Operations (not drops) in the best stack. */
  private bestCount = 0;
  private lowWater = 0;
  /** Stack entries copied into the best stack so far (linear in the steps; a test reads it). */
  copied = 0;
  /** The operation that could not be placed after `longest` (-1: none). */
  blocked = -1;

  private readonly entries: EntryList;
  private readonly inputs: I[];
  private readonly outputs: (O | undefined)[];
  private readonly cache: ConfigurationCache<S>;
  private readonly linearized: Uint32Array;
  private readonly zobrist: Int32Array;
  private readonly stackEntry: Int32Array;
  private readonly stackState: (S | undefined)[];
  /** 1 where the stacked operation is read-only: no alternative to it needs trying. */
  private readonly stackForced: Uint8Array;
  /** 1 where the stacked operation was dropped (left out), not linearized. */
  private readonly stackDropped: Uint8Array;
  /** Per operation: 1 when it must be linearized and never changes the state. */
  private readonly readOnly: Uint8Array;
  private sp = 0;
  private entry: number;
  private state: S;
  private setHash = 0;
  private remaining: number;
  /** Stacked drops (sp minus them: operations linearized). */
  private drops = 0;

  /** @param relevance the model's `relevance` of `ops`, when the caller computed it already (a step it times on its own). */
  constructor(
    private readonly model: Model<S, I, O>,
    ops: readonly Operation<I, O>[],
    relevance: readonly (number | undefined)[] | undefined = model.relevance?.(ops),
  ) {
    this.entries = buildEntries(ops, relevance);
    this.inputs = ops.map((o) => o.input);
    this.outputs = ops.map((o) => o.output);
    const words = Math.max(1, Math.ceil(ops.length / 32));
    this.linearized = new Uint32Array(words);
    const mandatory = new Uint32Array(words);
    ops.forEach((o, i) => {
      if (!isPending(o)) mandatory[i >>> 5]! |= 1 << (i & 31);
    });
    this.cache = new ConfigurationCache<S>(words, mandatory, (a, b) => model.equal(a, b));
    // Pending operations stay out of the hash: the cache compares them by inclusion.
    this.zobrist = zobristWords(ops.length).map((z, i) => (isPending(ops[i]!) ? 0 : z));
    this.stackEntry = new Int32Array(ops.length);
    this.stackForced = new Uint8Array(ops.length);
    this.stackDropped = new Uint8Array(ops.length);
    this.readOnly = Uint8Array.from(ops, (o) => (!isPending(o) && model.readOnly?.(o.input, o.output) === true ? 1 : 0));
    this.stackState = new Array<S | undefined>(ops.length).fill(undefined);
    this.bestEntry = new Int32Array(ops.length);
    this.bestDropped = new Uint8Array(ops.length);
    this.entry = this.entries.next[this.entries.head]!;
    this.state = model.init();
    this.remaining = this.entries.mandatory;
  }

  /** Runs at most `budget` iterations; returns the status reached. */
  run(budget: number): SearchStatus {
    if (this.status !== 'running') return this.status;
    const { next, prev, op, match, head, optional, callOf } = this.entries;
    const { inputs, outputs, cache, linearized: lin, zobrist, stackEntry, stackState, stackForced, stackDropped, readOnly, model } = this;
    // Imported bindings are live (a getter call each under tsx): copy them once.
    const NIL = NIL_ENTRY;
    const RETURN = RETURN_ENTRY;
    const ILLEGAL = illegal;
    let e = this.entry;
    let state = this.state;
    let sp = this.sp;
    let setHash = this.setHash;
    let remaining = this.remaining;
    let drops = this.drops;
    let n = 0;
    for (; n < budget; n++) {
      if (remaining === 0) {
        this.status = 'linearizable';
        this.keep(sp, drops);
        break;
      }
      const m = e === NIL ? RETURN : match[e]!;
      if (m !== RETURN) {
        const o = op[e]!;
        const stepped = model.step(state, inputs[o]!, outputs[o]);
        if (stepped !== ILLEGAL) {
          const ns = stepped as S;
          // A pending operation that leaves the state as it is achieves
          // nothing here (the configuration without it covers this one).
          if (optional[o] === 1 && (ns === state || model.equal(ns, state))) {
            e = next[e]!;
            continue;
          }
          const forced = readOnly[o]!;
          const word = o >>> 5;
          const bit = 1 << (o & 31);
          lin[word]! |= bit;
          const h = setHash ^ zobrist[o]!;
          // The first entry, with its own return next, of an operation that
          // must be placed: every other operation left began after it
          // returned, so it is the only candidate and the
          // configuration after it has one way in from here. Not memoised:
          // a sequential stretch of the history then costs neither a bitset
          // per operation (quadratic memory) nor a cache probe; a second way
          // in costs at most a walk to the next memoised configuration.
          const alone = m !== NIL && optional[o] === 0 && e === next[head] && next[e] === m;
          if (alone || cache.add((h ^ Math.imul(model.hash(ns), 0x9e3779b1)) | 0, lin, ns)) {
            stackEntry[sp] = e;
            stackState[sp] = state;
            stackForced[sp] = forced;
            stackDropped[sp] = 0;
            sp++;
            state = ns;
            setHash = h;
            // lift the call and its return out of the list
            const pe = prev[e]!;
            const ne = next[e]!;
            next[pe] = ne;
            if (ne !== NIL) prev[ne] = pe;
            if (m !== NIL) {
              if (optional[o] === 0) remaining--;
              const pm = prev[m]!;
              const nm = next[m]!;
              next[pm] = nm;
              if (nm !== NIL) prev[nm] = pm;
            }
            e = next[head]!;
            continue;
          }
          lin[word]! &= ~bit;
          if (forced === 1) {
            // A read-only operation that must be placed: the configuration
            // after it is covered by an explored one, so this one is too (no
            // configuration on the stack can cover it: it lacks this operation).
            e = NIL;
            continue;
          }
        }
        e = next[e]!;
      } else if (e !== NIL && optional[op[e]!] === 1) {
        // The optional return of an unknown operation left unplaced: past
        // here it can no longer matter, so it is dropped (forced).
        const o = op[e]!;
        const c = callOf[o]!;
        // Not memoised: the configuration after it is covered by this one (same state, one unknown operation more).
        lin[o >>> 5]! |= 1 << (o & 31);
        stackEntry[sp] = c;
        stackState[sp] = state;
        stackForced[sp] = 1;
        stackDropped[sp] = 1;
        sp++;
        drops++;
        const pc = prev[c]!;
        const nc = next[c]!;
        next[pc] = nc;
        if (nc !== NIL) prev[nc] = pc;
        const pr = prev[e]!;
        const nr = next[e]!;
        next[pr] = nr;
        if (nr !== NIL) prev[nr] = pr;
        // Every candidate before this entry was tried already in this state.
        e = nr;
      } else {
        // A return entry: its operation had to be linearized before this
        // point. NIL: this configuration is known to be redundant.
        if (e !== NIL && (sp - drops > this.bestCount || this.blocked < 0)) {
          this.keep(sp, drops);
          this.blocked = op[e]!;
        }
        if (sp === 0) {
          this.status = 'not-linearizable';
          break;
        }
        sp--;
        if (sp < this.lowWater) this.lowWater = sp;
        drops -= stackDropped[sp]!;
        e = stackEntry[sp]!;
        state = stackState[sp]!;
        stackState[sp] = undefined;
        const o = op[e]!;
        lin[o >>> 5]! &= ~(1 << (o & 31));
        setHash ^= zobrist[o]!;
        const mm = match[e]!;
        // unlift, in the reverse order of the lift
        if (mm !== NIL) {
          if (optional[o] === 0) remaining++;
          next[prev[mm]!] = mm;
          const nm = next[mm]!;
          if (nm !== NIL) prev[nm] = mm;
        }
        next[prev[e]!] = e;
        const ne = next[e]!;
        if (ne !== NIL) prev[ne] = e;
        e = stackForced[sp] === 1 ? NIL : ne;
      }
    }
    this.steps += n;
    this.entry = e;
    this.state = state;
    this.sp = sp;
    this.setHash = setHash;
    this.remaining = remaining;
    this.drops = drops;
    return this.status;
  }

  /** Copies the stack's changed part into the best one (see `bestEntry`). */
  private keep(sp: number, drops: number): void {
    for (let i = this.lowWater; i < sp; i++) {
      this.bestEntry[i] = this.stackEntry[i]!;
      this.bestDropped[i] = this.stackDropped[i]!;
    }
    this.copied += Math.max(0, sp - this.lowWater);
    this.bestSp = sp;
    this.bestCount = sp - drops;
    this.lowWater = sp;
  }

  /** Longest sequence of operations (partition indices) linearized at once; the full order when linearizable. */
  get longest(): Int32Array {
    return stackOps(this.bestEntry, this.bestDropped, this.bestSp, this.entries.op);
  }

  /** Configurations memoised so far. */
  get explored(): number {
    return this.cache.size;
  }

  /** Bytes the memo table may hold once `steps` more iterations have run (each memoises at most one configuration). */
  memoryAfter(steps: number): number {
    return this.cache.bytesAfter(steps);
  }
}

function stackOps(stackEntry: Int32Array, stackDropped: Uint8Array, sp: number, op: Int32Array): Int32Array {
  const out: number[] = [];
  for (let i = 0; i < sp; i++) if (stackDropped[i] === 0) out.push(op[stackEntry[i]!]!);
  return Int32Array.from(out);
}

/** Deterministic random words (splitmix32), one per operation. */
function zobristWords(n: number): Int32Array {
  const out = new Int32Array(n);
  let x = 0x2545f491;
  for (let i = 0; i < n; i++) {
    x = (x + 0x9e3779b9) | 0;
    let z = x;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    out[i] = z ^ (z >>> 16);
  }
  return out;
}
