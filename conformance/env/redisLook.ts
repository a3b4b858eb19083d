import type { Redis } from 'ioredis';

/**
 * Reads a lock key as a plain GET would, without the read deleting it. A
 * GET of an expired key deletes it (Redis expires keys lazily, on access),
 * so the harness's own look would purge a key that no client touched and
 * that the server's expiry cycle had not reached yet; a clock stepped back
 * afterwards then finds it gone, where a server nobody looked at finds it
 * alive again (LIVE-1, spec 8.3). While clients are paused a server expires
 * nothing (it answers as if the key were gone, and keeps it), so the look
 * runs inside a pause of writes that ends with it, one round trip. Only on
 * servers lockcheck started: a pause would hold up every other client of a
 * user's server.
 */
export async function lookWithoutExpiring(admin: Redis, key: string): Promise<string | null> {
  const replies = await admin.pipeline().call('CLIENT', 'PAUSE', String(LOOK_PAUSE_MS), 'WRITE').get(key).call('CLIENT', 'UNPAUSE').exec();
  if (replies === null) throw new Error(`the look at ${key} was not run (the connection closed)`);
  const [error, owner] = replies[1]!;
  if (error !== null) throw error;
  // A server that refused the pause (before Redis 6.2 there is no CLIENT PAUSE WRITE, nor UNPAUSE) answered a plain GET:
  // the look is still right, it only may have deleted an expired key (a LIVE-1 after a backward clock step goes unseen).
  return owner as string | null;
}

/** The longest a look's pause could last should its UNPAUSE never arrive (the pause ends by itself then). */
const LOOK_PAUSE_MS = 1000;
