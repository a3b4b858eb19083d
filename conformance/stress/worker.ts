import type { FromClient, GateRequest, ToClient } from './protocol.ts';
import { connectClient } from './client.ts';
import { runWorkload } from './workload.ts';

/**
 * A client process of a stress run (forked by the runner through worker.mjs):
 * waits for its config, runs the workload, sends its events over IPC and
 * exits. It exits too when the runner goes away (the IPC channel closes).
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
  } else if (m.kind === 'start') {
    void main(m.config);
  }
});
send({ kind: 'ready' });

async function main(config: Extract<ToClient, { kind: 'start' }>['config']): Promise<void> {
  try {
    const client = await connectClient(config.backend);
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
    await client.close().catch(() => undefined);
    send({ kind: 'done', cycles });
  } catch (e) {
    send({ kind: 'error', message: e instanceof Error ? e.message : String(e) });
  }
  process.disconnect();
  setTimeout(() => process.exit(0), 1000).unref();
}
