import type { ClientConfig, FromClient, GateRequest, ToClient } from './protocol.ts';
import { connectClient } from './client.ts';
import { runWorkload } from './workload.ts';
import { loadConcurrent } from './adapterRef.ts';
import { AdapterBreach } from './adapterBreach.ts';

/**
 * A client process of a stress session (forked by the runner through
 * worker.mjs): for each `start`, connects, runs the workload, sends its
 * events over IPC and reports `done`; then waits for the next run. It exits
 * when the runner goes away or lets it go (the IPC channel closes).
 */
const send = (m: FromClient): void => {
  if (process.connected) process.send!(m);
};

let stopping = false;
let openGate: (() => void) | null = null;

process.on('disconnect', () => process.exit(0));
process.on('message', (raw: unknown) => {
  const m = raw as ToClient;
  if (m.kind === 'stop') {
    stopping = true;
    openGate?.(); // a gated client finishes its cycle
  } else if (m.kind === 'go') {
    const open = openGate;
    openGate = null;
    open?.();
  } else if (m.kind === 'prepare') {
    loadConcurrent(m.adapter).then(
      () => send({ kind: 'prepared' }),
      (e: unknown) => send({ kind: 'prepared', error: e instanceof Error ? e.message : String(e) }),
    );
  } else if (m.kind === 'start') {
    stopping = false;
    void run(m.config);
  }
});
send({ kind: 'ready' });

async function run(config: ClientConfig): Promise<void> {
  const failed = (e: unknown): FromClient => ({ kind: e instanceof AdapterBreach ? 'broke' : 'error', message: e instanceof Error ? e.message : String(e) });
  let client;
  try {
    client = await connectClient(config.backend);
  } catch (e) {
    send(failed(e));
    return;
  }
  let outcome: FromClient;
  try {
    const cycles = await runWorkload(config, client, {
      emit: (events) => send({ kind: 'events', events }),
      gate: (request: GateRequest) =>
        new Promise<void>((resolve) => {
          if (stopping) return resolve();
          openGate = resolve;
          send(request);
        }),
      stopping: () => stopping,
    });
    outcome = { kind: 'done', cycles };
  } catch (e) {
    outcome = failed(e);
  }
  // Told before the close, as an end is: a close() that never settles must not hold back why the client stopped (it read as a cycle never finished).
  send(outcome);
  await client.close().catch(() => undefined);
}
