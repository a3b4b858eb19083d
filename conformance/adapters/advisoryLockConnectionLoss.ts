/**
 * What advisory-lock@2.0.0 does when the server ends the session that holds
 * its lock. Run as a child process (it is expected to die):
 *
 *   LOCKCHECK_PG_URL=postgres://user@host:port/db node --import tsx conformance/adapters/advisoryLockConnectionLoss.ts
 *
 * It takes the lock with tryLock(), has the server end that session
 * (pg_terminate_backend, as a DBA, a failover or keepalive after a partition
 * would), and prints "survived" if the process is still alive a second later.
 * With 2.0.0 it does not get there: the library's pg.Client has no 'error'
 * listener, so pg's 'error' event becomes an uncaught exception and the
 * process exits with code 1 ("terminating connection due to administrator
 * command" on stderr). Every wait is bounded.
 */
import pg from 'pg';
import { advisoryLock } from './advisoryLock.ts';

const GRACE_MS = 1_000;
const BOUND_MS = 10_000;

const url = process.env.LOCKCHECK_PG_URL;
if (url === undefined || url === '') {
  console.error('LOCKCHECK_PG_URL is not set');
  process.exit(2);
}
// A hung server fails the demonstration, it does not hang it.
setTimeout(() => {
  console.error(`no outcome within ${BOUND_MS} ms`);
  process.exit(3);
}, BOUND_MS).unref();

const applicationName = `lockcheck-connection-loss-${process.pid}`;
const unlock = await advisoryLock(`${url}?application_name=${applicationName}`)('connection-loss').tryLock();
if (unlock === undefined) {
  console.error('tryLock was refused');
  process.exit(2);
}
console.log('granted');
const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: BOUND_MS, query_timeout: BOUND_MS });
admin.on('error', () => undefined);
await admin.connect();
await admin.query('SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = $1', [applicationName]);
console.log('session terminated');
await new Promise((resolve) => setTimeout(resolve, GRACE_MS));
await admin.end();
console.log('survived');
await unlock().catch(() => undefined);
