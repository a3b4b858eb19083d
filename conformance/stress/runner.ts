import type { RecordedEvent } from './protocol.ts';
import { ClientFleet } from './fleet.ts';
import type { NemesisFault } from './nemesis.ts';
import { isTargeted, Nemesis, needsFakeClocks, needsProxies, unsupported } from './nemesis.ts';
import type { FencePolicy, FromClient } from './protocol.ts';
import { Random } from './random.ts';
import { Recorder } from './recorder.ts';
import type { StressBackend, StressServers } from './servers.ts';
import { startServers } from './servers.ts';
import { sharedNowMs } from './sharedClock.ts';

/**
 * A stress run: N client processes race on real servers with a Jepsen-style
 * workload while the nemesis injects faults; the result is the history.
 * Everything it starts (servers, proxies, client processes) is gone when it
 * returns or throws.
 */
export interface StressOptions {
  readonly backend: StressBackend;
  readonly clients: number;
  readonly seconds: number;
  readonly nemesis: readonly NemesisFault[];
  readonly seed: number;
  /** The register's store (pg-xact ignores it: its writes are in the lock's transaction). */
  readonly store: FencePolicy;
  readonly resources: number;
  readonly ttlMinMs: number;
  readonly ttlMaxMs: number;
  /** Per client; default unbounded (the time bound stops the run). */
  readonly maxCycles?: number;
  /** Stop once the nemesis has struck this many times (the clients finish their cycles first). */
  readonly maxFaults?: number;
  readonly progress?: (line: string) => void;
}

export interface StressRun {
  readonly history: RecordedEvent[];
  /** From the clients' start to their last event, ms. */
  readonly durationMs: number;
  /** Setup (servers and processes) and teardown, ms. */
  readonly overheadMs: number;
  readonly cycles: number;
  readonly faults: number;
  /** Client processes that failed (a message each); their events up to then are in the history. */
  readonly clientErrors: readonly string[];
}

export function checkStressOptions(o: StressOptions): void {
  for (const f of o.nemesis) {
    const why = unsupported(f, o.backend);
    if (why !== null) throw new RangeError(why);
  }
  if (o.ttlMinMs > o.ttlMaxMs) throw new RangeError(`ttl range ${o.ttlMinMs}-${o.ttlMaxMs} is empty`);
}

export async function runStress(o: StressOptions): Promise<StressRun> {
  checkStressOptions(o);
  const t0 = sharedNowMs();
  const report = o.progress ?? (() => undefined);
  const progress = (line: string): void => report(`[${((sharedNowMs() - t0) / 1000).toFixed(1)} s] ${line}`);
  const random = new Random(o.seed);
  const recorder = new Recorder();
  const clientErrors: string[] = [];
  let cycles = 0;
  let done = 0;
  let nemesis: Nemesis | null = null;
  let fleet: ClientFleet | null = null;
  let servers: StressServers | null = null;
  let allDone!: () => void;
  const finished = new Promise<void>((resolve) => (allDone = resolve));
  const onMessage = (client: number, m: FromClient): void => {
    switch (m.kind) {
      case 'events':
        recorder.add(m.events);
        return;
      case 'gate':
        void (nemesis?.atGate(client, m) ?? Promise.resolve()).finally(() => fleet?.go(client));
        return;
      case 'done':
        cycles += m.cycles;
        if (++done === o.clients) allDone();
        return;
      case 'error':
        clientErrors.push(`client ${client}: ${m.message}`);
        if (++done === o.clients) allDone();
        return;
      case 'ready':
        return;
    }
  };
  let startedAt = 0;
  try {
    progress(`${o.backend}: starting servers`);
    servers = await startServers({ backend: o.backend, clients: o.clients, store: o.store, fakeClocks: needsFakeClocks(o.nemesis), proxied: needsProxies(o.nemesis) });
    progress(`${o.backend}: starting ${o.clients} client processes`);
    fleet = await ClientFleet.start(o.clients, onMessage);
    nemesis = new Nemesis({ faults: o.nemesis, servers, fleet, recorder, random, ttlMinMs: o.ttlMinMs, ttlMaxMs: o.ttlMaxMs });
    startedAt = sharedNowMs();
    const untilMs = startedAt + o.seconds * 1000;
    const gate = o.nemesis.some(isTargeted);
    for (let c = 0; c < o.clients; c++) {
      fleet.start(c, {
        process: c,
        seed: (o.seed + 7919 * (c + 1)) | 0,
        backend: servers.clientBackend(c),
        workload: { resources: o.resources, ttlMinMs: o.ttlMinMs, ttlMaxMs: o.ttlMaxMs, untilMs, maxCycles: o.maxCycles ?? Number.MAX_SAFE_INTEGER, gate },
      });
    }
    progress(`${o.backend}: running for ${o.seconds} s (nemesis: ${o.nemesis.length > 0 ? o.nemesis.join(', ') : 'none'})`);
    const ticker = setInterval(() => progress(`${o.backend}: ${Math.round((sharedNowMs() - startedAt) / 1000)} s, ${recorder.size} events, ${nemesis?.count ?? 0} faults`), 5_000);
    try {
      await Promise.race([nemesis.run(untilMs, o.maxFaults), finished]);
    } finally {
      clearInterval(ticker);
      await nemesis.heal();
    }
    // The clients stop by themselves at untilMs (or maxCycles); stop() bounds the wait and kills stragglers.
    const enough = o.maxFaults !== undefined && nemesis.count >= o.maxFaults;
    if (!enough) await Promise.race([finished, new Promise((resolve) => setTimeout(resolve, Math.max(0, untilMs - sharedNowMs()) + 100))]);
    progress(`${o.backend}: stopping the clients`);
    await fleet.stop();
    progress(`${o.backend}: stopping the servers`);
  } finally {
    await fleet?.kill();
    await servers?.stop();
  }
  const history = recorder.history();
  const last = history.length > 0 ? history[history.length - 1]!.time : startedAt;
  const durationMs = Math.max(0, last - startedAt);
  return { history, durationMs, overheadMs: sharedNowMs() - t0 - durationMs, cycles, faults: nemesis?.count ?? 0, clientErrors };
}
