/**
 * A listener of the environment's own (a TCP proxy, a peer gate) on a free
 * loopback port: all or nothing. A start that fails after the bind (no port
 * to read) would otherwise leave the server listening, and ref'd, with no
 * object left to close it.
 */
import type { Server } from 'node:net';
import { EnvironmentError } from './faketime.ts';

/** Listens `server` on a free port of `host` and resolves the port; on any failure the server is closed first, then EnvironmentError (the failure its cause). */
export async function listenOnFreePort(server: Server, host: string, what: string): Promise<number> {
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = server.address();
    if (typeof address !== 'object' || address === null) throw new Error(`no port to read (address() gave ${JSON.stringify(address)})`);
    return address.port;
  } catch (error) {
    await closed(server);
    throw new EnvironmentError(`${what}: could not listen on a free port of ${host}: ${error instanceof Error ? error.message : String(error)}`, null, { cause: error });
  }
}

/** Closes `server` whether or not it listens (close() of one that does not reports ERR_SERVER_NOT_RUNNING: nothing to close). */
function closed(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
