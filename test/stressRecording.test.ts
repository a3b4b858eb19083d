import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { checkHistory } from '../conformance/history/check.ts';
import { parseHistory } from '../conformance/history/parse.ts';
import { connectClient, type StressClient } from '../conformance/stress/client.ts';
import type { ClientBackend, ClientConfig, RecordedEvent } from '../conformance/stress/protocol.ts';
import { Recorder, toJsonl } from '../conformance/stress/recorder.ts';
import { sharedNowMs } from '../conformance/stress/sharedClock.ts';
import { runWorkload } from '../conformance/stress/workload.ts';

let server: RedisServer;
beforeAll(async () => {
  server = await RedisServer.start({ persistence: 'none' });
}, 60_000);
afterAll(async () => {
  await server?.stop();
}, 60_000);

const config = (process: number, backend: ClientBackend, prefix: string): ClientConfig => ({
  process,
  seed: 17 + process,
  backend,
  // One resource, so the second client reads the register the first wrote; a short ttl, so it gets the lock once the first is gone.
  workload: { resources: 1, prefix, ttlMinMs: 300, ttlMaxMs: 300, untilMs: sharedNowMs() + 30_000, maxCycles: 2_000, gate: false },
});

describe('stress recording: a client process that dies in a call', () => {
  it('has the call pending in the history, and all it did before: a read of its write is no violation (also read back from the file)', async () => {
    const backend: ClientBackend = { kind: 'redis', nodes: [server.url], store: server.url, storePolicy: 'strict' };
    const recorder = new Recorder();
    const real = await connectClient(backend);
    let inWrite!: () => void;
    const writing = new Promise<void>((resolve) => (inWrite = resolve));
    let lostReply!: (e: Error) => void;
    const hung = new Promise<never>((_resolve, reject) => (lostReply = reject));
    // The write lands in Redis, then the process dies before its reply: from here on it records nothing.
    let dead = false;
    const dying: StressClient = {
      ...real,
      write: async (lease, value) => {
        await real.write(lease, value);
        dead = true;
        inWrite();
        return hung;
      },
    };
    const io = (emit: (events: readonly RecordedEvent[]) => void) => ({ emit, gate: async () => undefined, stopping: () => false });
    let other: StressClient | undefined;
    let first: Promise<number> | undefined;
    try {
      // Process 1 writes the register first, so that a value nobody wrote read later is a violation.
      other = await connectClient(backend);
      expect(await runWorkload({ ...config(1, backend, 'dies-'), workload: { ...config(1, backend, 'dies-').workload, maxCycles: 1 } }, other, io((events) => recorder.add(events)))).toBe(1);
      await other.close();
      other = undefined;
      const before = recorder.size;
      first = runWorkload(config(0, backend, 'dies-'), dying, io((events) => (dead ? undefined : recorder.add(events))));
      await writing;
      // What the runner has now is all it will ever have of process 0.
      expect(recorder.history().slice(before).map((e) => ('op' in e ? `${e.type} ${e.op}` : e.type))).toEqual(['invoke acquire', 'ok acquire', 'invoke read', 'ok read', 'invoke write']);
      recorder.endHolds(0, 'process-exited');
      // Another client gets the lock once the lease has run out and reads the register: process 0's value.
      other = await connectClient(backend);
      let read = false;
      await runWorkload(config(2, backend, 'dies-'), other, {
        emit: (events) => {
          recorder.add(events);
          read ||= events.some((e) => e.type === 'ok' && 'op' in e && e.op === 'read' && e.value === '0.0');
        },
        gate: async () => undefined,
        stopping: () => read,
      });
      expect(read).toBe(true);
      const history = recorder.history();
      const report = checkHistory(history, { storePolicy: 'strict' });
      expect(report.verdict, JSON.stringify(report.checks)).toBe('safe');
      const readBack = parseHistory(toJsonl(history));
      if (readBack instanceof Error) throw readBack;
      expect(checkHistory(readBack, { storePolicy: 'strict' }).verdict).toBe('safe');
    } finally {
      lostReply(new Error('connection lost'));
      await first?.catch(() => undefined);
      await real.close();
      await other?.close();
    }
  }, 60_000);
});

describe('stress recording: a client process that dies holding a session lock', () => {
  it("its hold ends at its last event, not when the runner saw it exit: the server's free and the next grant between are no second holder", () => {
    // Process 0 holds a session lock (no deadline), reads, then dies; the server frees the session at once and process 1
    // takes the lock, all before the runner (its event loop late, a loaded machine) sees the exit. Reproduced on
    // pg-session with pause-holder and a SIGKILL of the paused holder: 'two clients believed they held s0-r0 at once'.
    const recorder = new Recorder();
    const lock = { resource: 'r', owner: 'pg:1:1' };
    recorder.add([
      { type: 'invoke', process: 0, time: 10, op: 'acquire', resource: 'r' },
      { type: 'ok', process: 0, time: 11, op: 'acquire', ...lock, token: '1' },
      { type: 'invoke', process: 0, time: 12, op: 'read', resource: 'r', key: 'r' },
      { type: 'ok', process: 0, time: 13, op: 'read', resource: 'r', key: 'r', value: null },
      { type: 'invoke', process: 1, time: 30, op: 'acquire', resource: 'r' },
      { type: 'ok', process: 1, time: 31, op: 'acquire', resource: 'r', owner: 'pg:2:1', token: '2' },
    ] as RecordedEvent[]);
    recorder.endHolds(0, 'process-exited');
    const signal = recorder.history().find((e) => e.type === 'signal');
    expect(signal).toEqual({ type: 'signal', process: 0, time: 13, ...lock, token: '1', reason: 'process-exited' });
    const report = checkHistory(recorder.history());
    expect(report.findings).toEqual([]);
    expect(report.verdict).toBe('safe');
  });

  it('a session lock it acquired twice and released once is still held: its signal ends every level at its last event', () => {
    const recorder = new Recorder();
    const lock = { resource: 'r', owner: 'pg:1:1' };
    const grant = (t: number) => [
      { type: 'invoke', process: 0, time: t, op: 'acquire', resource: 'r' },
      { type: 'ok', process: 0, time: t + 1, op: 'acquire', ...lock, token: '1' },
    ];
    const release = (t: number, outcome: string) => [
      { type: 'invoke', process: 0, time: t, op: 'release', ...lock, token: '1' },
      { type: outcome, process: 0, time: t + 1, op: 'release', resource: 'r' },
    ];
    // Two levels, a release that failed (nothing given back), one that succeeded: one level held when it dies at 17.
    recorder.add([...grant(10), ...grant(12), ...release(14, 'fail'), ...release(16, 'ok')] as RecordedEvent[]);
    recorder.add([
      { type: 'invoke', process: 1, time: 30, op: 'acquire', resource: 'r' },
      { type: 'ok', process: 1, time: 31, op: 'acquire', resource: 'r', owner: 'pg:2:1', token: '2' },
    ] as RecordedEvent[]);
    recorder.endHolds(0, 'process-exited');
    expect(recorder.history().filter((e) => e.type === 'signal')).toEqual([{ type: 'signal', process: 0, time: 17, ...lock, token: '1', reason: 'process-exited' }]);
    expect(checkHistory(recorder.history()).verdict).toBe('safe');
    // Released at each level: nothing held, no signal.
    const released = new Recorder();
    released.add([...grant(10), ...grant(12), ...release(14, 'ok'), ...release(16, 'ok')] as RecordedEvent[]);
    released.endHolds(0, 'process-exited');
    expect(released.history().filter((e) => e.type === 'signal')).toEqual([]);
  });
});
