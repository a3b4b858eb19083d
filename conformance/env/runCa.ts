/**
 * A certificate authority made for one run, and what it signs: a certificate
 * for the servers (IP 127.0.0.1, for serving and for dialling peers) and one
 * for lockcheck's own clients. Servers started with it accept only TLS
 * clients that present a certificate of this CA, so a local user who cannot
 * read the run's 0700 directory gets no request through: the handshake fails
 * before the server reads a byte. The keys are made here (never fixed, never
 * printed), written mode 0600 into the caller's private directory, and the
 * CA's key is deleted once both certificates are signed: nothing more can be
 * signed with it. openssl signs (Node has no API to make certificates).
 */
import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { allSettledFirst } from './allOrNothing.ts';
import { EnvironmentError } from './faketime.ts';

const run = promisify(execFile);
const INSTALL_OPENSSL = 'apt-get update && apt-get install -y --no-install-recommends openssl';

/** PEM text a TLS client needs to reach the run's servers: the CA to trust, and its own certificate and key (secret). */
export interface ClientTls {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
  /** The name the servers' certificate carries besides 127.0.0.1, sent as the TLS server name (an IP address may not be one). */
  readonly serverName: string;
}

/** The host name in the run's server certificate (with IP 127.0.0.1): what clients send as the TLS server name. */
export const RUN_SERVER_NAME = 'localhost';

/** Files a server reads: the CA it trusts for clients and peers, its certificate and key. */
export interface ServerTlsFiles {
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
}

export interface RunCa {
  readonly server: ServerTlsFiles;
  readonly client: ClientTls;
}

/** Makes the CA and both certificates in `dir`, which must be the caller's own 0700 directory. */
export async function makeRunCa(dir: string): Promise<RunCa> {
  const file = (name: string): string => join(dir, name);
  const newKey = async (name: string): Promise<string> => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    await writeFile(file(name), pem, { mode: 0o600, flag: 'wx' });
    return pem;
  };
  await newKey('ca.key');
  await newKey('server.key');
  const clientKey = await newKey('client.key');
  // A config of the leaves' extensions alone (no system openssl.cnf read): IP 127.0.0.1 and the name clients send, for serving and for dialling.
  await writeFile(file('leaf.cnf'), ['[leaf]', `subjectAltName=IP:127.0.0.1,DNS:${RUN_SERVER_NAME}`, 'extendedKeyUsage=serverAuth,clientAuth', 'basicConstraints=critical,CA:FALSE', ''].join('\n'), { mode: 0o600, flag: 'wx' });
  const openssl = async (args: readonly string[]): Promise<void> => {
    try {
      await run('openssl', [...args], { timeout: 10_000, env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' } });
    } catch (error) {
      const e = error as NodeJS.ErrnoException & { stderr?: string };
      if (e.code === 'ENOENT') throw new EnvironmentError('openssl is not installed (not found on PATH): it signs the run\'s TLS certificates', INSTALL_OPENSSL);
      throw new EnvironmentError(`openssl ${args[0] ?? ''} failed while making the run's certificates: ${(e.stderr ?? e.message).trim()}`);
    }
  };
  // A random subject per run: a certificate of another run (or user) names another CA and is refused.
  const runId = randomBytes(8).toString('hex');
  await openssl(['req', '-x509', '-new', '-key', file('ca.key'), '-subj', `/CN=lockcheck run CA ${runId}`, '-days', '2', '-out', file('ca.crt'), '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign']);
  // Each leaf in one call (OpenSSL 3: req -x509 -CA signs with the CA), both at once; a failure is thrown once
  // both ended, not while the other still signs into a directory the caller is about to remove.
  await allSettledFirst(
    (['server', 'client'] as const).map((leaf) =>
      openssl(['req', '-x509', '-new', '-key', file(`${leaf}.key`), '-subj', `/CN=lockcheck ${leaf} ${runId}`, '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-set_serial', `0x${randomBytes(16).toString('hex')}`, '-days', '2', '-config', file('leaf.cnf'), '-extensions', 'leaf', '-out', file(`${leaf}.crt`)]),
    ),
  );
  await rm(file('ca.key'));
  await rm(file('leaf.cnf'));
  const ca = await readFile(file('ca.crt'), 'utf8');
  return {
    server: { caFile: file('ca.crt'), certFile: file('server.crt'), keyFile: file('server.key') },
    client: { ca, cert: await readFile(file('client.crt'), 'utf8'), key: clientKey, serverName: RUN_SERVER_NAME },
  };
}
