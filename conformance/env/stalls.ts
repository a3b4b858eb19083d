/**
 * Stalls: a request to a server lockcheck started that fails only after a
 * whole real-time bound. No fault the runner injects makes a request take
 * real time (a crash resets the connection at once; a black hole, a delay or
 * a late reply acts in the network layer on virtual time), so such a request
 * was held up by the machine: the test process or the server starved of CPU,
 * a disk behind other processes' writes. Its failure (a vote against, a
 * `no-quorum`, a thrown write) is no evidence against the backend: the run is
 * stalled (out of pace: inconclusive, and tried again).
 */
import { TimeoutError } from '../../impl/errors.ts';
import { rejectAfter } from '../realTimeLimit.ts';

/** Marks a run stalled, saying what took too long (VirtualTime.stalled). */
export type Stalled = (what: string) => void;

/**
 * Watches `reply`, sent at `sentMs` (performance.now()): if it fails after
 * `boundMs` or more of real time, `stalled` is told before anyone awaiting
 * `reply` sees the failure (this handler is attached first). Measured from
 * the send, so that a driver's timer firing before a reply already in the
 * socket (Node runs timers before reading, after a stall) counts too.
 */
export function stallsFail(reply: Promise<unknown>, sentMs: number, boundMs: number, what: () => string, stalled: Stalled): void {
  reply.catch(() => {
    const tookMs = performance.now() - sentMs;
    if (tookMs >= boundMs) stalled(`${what()} failed after ${Math.round(tookMs)} ms of real time (bound ${boundMs} ms)`);
  });
}

/**
 * Sends `roundTrip` now, bounded by `boundMs` of real time: a failure after
 * the bound (the driver's own timer) or the bound itself running out (a
 * client whose timers are on the run's virtual clock, which a stalled round
 * trip keeps from moving) stalls the run. The bound rejects with
 * TimeoutError, an unknown outcome to the lock client, after telling
 * `stalled`. The harness's own timer: real time, whatever clock the client
 * reads.
 */
export function watchedRoundTrip<T>(roundTrip: () => Promise<T>, boundMs: number, what: () => string, stalled: Stalled): Promise<T> {
  const sentMs = performance.now();
  const reply = roundTrip();
  stallsFail(reply, sentMs, boundMs, what, stalled);
  return rejectAfter(reply, boundMs, () => {
    stalled(`${what()} failed after ${Math.round(performance.now() - sentMs)} ms of real time (bound ${boundMs} ms)`);
    return new TimeoutError(what(), boundMs);
  });
}
