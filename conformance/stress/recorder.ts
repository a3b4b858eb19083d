import type { HistoryEvent } from '../history/event.ts';
import type { RecordedEvent } from './protocol.ts';
import { sharedNowMs } from './sharedClock.ts';

/**
 * The runner's copy of the history as it arrives from the client processes
 * and the nemesis; the nemesis waits on it for the consequence of a fault
 * ("another client wrote this register since").
 */
export class Recorder {
  readonly #events: RecordedEvent[] = [];
  readonly #watchers = new Set<(e: RecordedEvent) => void>();

  add(events: readonly RecordedEvent[]): void {
    for (const given of events) {
      const e = wellFormed(given);
      this.#events.push(e);
      for (const w of [...this.#watchers]) w(e);
    }
  }

  /**
   * A client process died: its holds end (a dead process believes nothing).
   * Records a `signal` for each grant of `process` that no release or signal
   * has ended yet (one for all levels of a stacked session lock released fewer
   * times than acquired), at its last event: it died between that and now, but the
   * runner sees the exit late (its event loop busy, a loaded machine), while
   * the server frees a session lock at once and another client takes it, so
   * a signal at the runner's now made two holders of one (MUTEX-1) that never
   * were. After its last event the process acted on nothing: each call's
   * invoke leaves before its request does (workload.ts).
   */
  endHolds(process: number, reason: string): void {
    const open = new Map<string, OpenHold>();
    // The release in flight (a process has one operation at a time): its completion need not repeat the owner.
    let releasing: OpenHold | undefined;
    let last: number | undefined;
    for (const e of this.#events) {
      if (e.process !== process) continue;
      last = Math.max(last ?? -Infinity, e.time);
      if (releasing !== undefined && 'op' in e && e.op === 'release' && e.type !== 'invoke') {
        // A release of one of several stacked levels that certainly failed gave nothing back (holds.ts counts the same).
        if (e.type === 'fail' && open.get(releasing.key) === releasing) releasing.levels++;
        releasing = undefined;
      }
      if (!('resource' in e) || !('owner' in e) || e.owner === undefined) continue;
      const key = `${e.resource}\u0000${e.owner}`;
      const held = open.get(key);
      if (e.type === 'ok' && 'op' in e && e.op === 'acquire') {
        // A session lock (no deadline) acquired again without deadline with its token stacks (PostgreSQL): each level needs its release.
        const session = e.validUntil === undefined;
        if (held !== undefined && held.session && session && (held.hold.token === undefined || e.token === undefined || held.hold.token === e.token)) held.levels++;
        else open.set(key, { key, hold: { resource: e.resource, owner: e.owner, ...(e.token !== undefined ? { token: e.token } : {}) }, session, levels: 1 });
      } else if (e.type === 'signal') open.delete(key);
      else if (e.type === 'invoke' && 'op' in e && e.op === 'release' && held !== undefined) {
        if (--held.levels <= 0) open.delete(key);
        else releasing = held;
      }
    }
    const time = last ?? sharedNowMs();
    this.add([...open.values()].map((h) => ({ type: 'signal' as const, process, time, ...h.hold, reason })));
  }

  get size(): number {
    return this.#events.length;
  }

  /** Resolves true when an event matching `predicate` arrives, false once the shared clock passes `untilMs` or `signal` aborts. */
  waitFor(predicate: (e: RecordedEvent) => boolean, untilMs: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      const onAbort = (): void => done(false);
      const done = (found: boolean): void => {
        clearTimeout(timer);
        this.#watchers.delete(watcher);
        signal?.removeEventListener('abort', onAbort);
        resolve(found);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const watcher = (e: RecordedEvent): void => {
        if (predicate(e)) done(true);
      };
      const timer = setTimeout(() => done(false), Math.max(0, untilMs - sharedNowMs()));
      this.#watchers.add(watcher);
      if (signal?.aborted) done(false);
    });
  }

  /** The history in the order of the shared clock (events arrive in batches per process; a stable sort keeps each process's order). */
  history(): RecordedEvent[] {
    return [...this.#events].sort((a, b) => a.time - b.time);
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/**
 * An event as its file will hold it: a lone surrogate in a client's text (a
 * library's error message as reason) is U+FFFD, as UTF-8 writes it, so the
 * recording judged is the file's, and a valid history (check refuses lone
 * surrogates).
 */
function wellFormed(e: RecordedEvent): RecordedEvent {
  let out = e;
  for (const [k, v] of Object.entries(e)) {
    if (typeof v === 'string' && LONE_SURROGATE.test(v)) out = { ...out, [k]: wellFormedText(v) } as RecordedEvent;
  }
  return out;
}

/** `text` with each lone surrogate as U+FFFD (an adapter's name in the history's meta line, a client's message). */
export function wellFormedText(text: string): string {
  return text.replace(LONE_SURROGATES, '\uFFFD');
}

/** A grant of a dead process no release or signal has ended: `levels` stacked acquires of a session lock not yet released. */
interface OpenHold {
  readonly key: string;
  readonly hold: { readonly resource: string; readonly owner: string; readonly token?: string };
  readonly session: boolean;
  levels: number;
}

/** One JSON object per line (spec/SPEC.md, "Histories"). */
export function toJsonl(history: readonly HistoryEvent[]): string {
  return history.map((e) => JSON.stringify(e)).join('\n') + (history.length > 0 ? '\n' : '');
}
