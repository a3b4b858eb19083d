import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lookWithoutExpiring } from '../conformance/env/redisLook.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';

/**
 * The harness's look at a lock key (conformance/env/redisLook.ts) pauses
 * writes around a GET so that the look deletes no expired key. A server
 * without CLIENT PAUSE WRITE (Redis before 6.2, as apt installs on Ubuntu
 * 22.04) must still be looked at: the GET's answer, not an error that would
 * leave every run unjudged. Such a server is stood in for by one whose CLIENT
 * command is renamed away. (That the pause ends with the look, and that the
 * look deletes nothing, the Redis conformance suites show: every step of
 * theirs writes after a look, and the LIVE-1 test needs the expired key.)
 */
let plain: RedisServer;
let old: RedisServer;
const connections: Redis[] = [];
const connect = (s: RedisServer): Redis => {
  const r = new Redis({ ...s.connection, maxRetriesPerRequest: 1, commandTimeout: 5000 });
  connections.push(r);
  return r;
};
beforeAll(async () => {
  [plain, old] = await Promise.all([RedisServer.start({ persistence: 'none' }), RedisServer.start({ persistence: 'none', config: ['rename-command CLIENT ""'] })]);
}, 30_000);
afterAll(async () => {
  for (const r of connections) r.disconnect();
  await Promise.all([plain?.stop(), old?.stop()]);
});

describe('the look at a lock key', () => {
  it('reads the owner, or null for no key', async () => {
    const r = connect(plain);
    await r.set('lock', 'owner-1', 'PX', 60_000);
    expect(await lookWithoutExpiring(r, 'lock')).toBe('owner-1');
    expect(await lookWithoutExpiring(r, 'none')).toBeNull();
  });

  it('on a server that refuses the pause, answers as a plain GET', async () => {
    const r = connect(old);
    await r.set('lock', 'owner-2', 'PX', 60_000);
    expect(await lookWithoutExpiring(r, 'lock')).toBe('owner-2');
    expect(await lookWithoutExpiring(r, 'none')).toBeNull();
  });
});
