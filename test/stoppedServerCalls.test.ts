import { describe, expect, it } from 'vitest';
import { EtcdCluster } from '../conformance/env/etcdCluster.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { InvalidInputError } from '../model/errors.ts';

/**
 * A server or group the caller has stopped refuses what needs it running
 * (restart, pause, crash) with InvalidInputError 'precondition', the kit's
 * error for a call out of order: it was a plain Error, which a caller could
 * not tell from a failure of the server itself.
 */
const refusedAsPrecondition = async (call: () => unknown, named: RegExp): Promise<void> => {
  let thrown: unknown;
  try {
    await call();
  } catch (e) {
    thrown = e;
  }
  expect(thrown).toBeInstanceOf(InvalidInputError);
  expect(thrown).toMatchObject({ code: 'precondition', message: expect.stringMatching(named) as unknown });
};

describe('a stopped server refuses calls that need it running, typed', () => {
  it('RedisServer', async () => {
    const s = await RedisServer.start({ persistence: 'none' });
    await s.stop();
    await refusedAsPrecondition(() => s.restart(), /RedisServer: cannot restart a stopped server/);
    await refusedAsPrecondition(() => s.pause(), /RedisServer: cannot pause a stopped server/);
  });

  it('PostgresServer', async () => {
    const s = await PostgresServer.start();
    await s.stop();
    await refusedAsPrecondition(() => s.restart(), /PostgresServer: cannot restart a stopped server/);
    await refusedAsPrecondition(() => s.pause(), /PostgresServer: cannot pause a stopped server/);
  });

  it('EtcdCluster (a consensus group)', async () => {
    const c = await EtcdCluster.start({ members: 1, parentDir: '/dev/shm' });
    await c.stop();
    await refusedAsPrecondition(() => c.pause(0), /cannot pause a stopped cluster/);
    await refusedAsPrecondition(() => c.restart(0), /cannot restart a stopped cluster/);
  });
});
