/**
 * The test kit's starts are all or nothing: a TcpProxy or a PeerGate whose
 * start fails after its bind, and a consensus group whose gates fail to open
 * part way, leave no listener behind and reject with a typed error.
 */
import { Server } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EnvironmentError } from '../conformance/env/faketime.ts';
import { PeerGate } from '../conformance/env/peerGate.ts';
import { TcpProxy } from '../conformance/env/proxy.ts';
import { activeResources, backToBaseline } from './impl/resources.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

/** The next listener's address() reads null, as Node gives for a server that is no longer bound. */
function noPortToRead(): void {
  vi.spyOn(Server.prototype, 'address').mockReturnValueOnce(null);
}

describe('a listener of the kit that cannot read its port closes it', () => {
  it('TcpProxy.start: rejects EnvironmentError, nothing left listening', async () => {
    const baseline = activeResources();
    noPortToRead();
    const error = await TcpProxy.start({ host: '127.0.0.1', port: 9 }).then(
      () => null,
      (e: unknown) => e,
    );
    await backToBaseline(baseline, 'TcpProxy.start that failed', 1000);
    expect(error).toBeInstanceOf(EnvironmentError);
  });

  it('PeerGate.start: rejects EnvironmentError, nothing left listening', async () => {
    const baseline = activeResources();
    noPortToRead();
    const error = await PeerGate.start(9, () => []).then(
      async (gate) => {
        await gate.close();
        return null;
      },
      (e: unknown) => e,
    );
    await backToBaseline(baseline, 'PeerGate.start that failed', 1000);
    expect(error).toBeInstanceOf(EnvironmentError);
  });
});
