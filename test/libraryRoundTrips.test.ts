import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLockstep, textTimeline } from '../conformance/index.ts';
import type { BackendUnderTest, RunReport } from '../conformance/index.ts';
import type { RedisCluster } from '../conformance/env/redisBackend.ts';
import { startRedisCluster } from '../conformance/env/redisBackend.ts';
import { setNxLock } from './fixtures/setNxLock.ts';
import type { Command } from '../model/index.ts';

/**
 * What the kit counts as one round trip of a library's. Commands sent in one
 * write (an ioredis pipeline(), a MULTI/EXEC transaction, which ioredis
 * pipelines) reach the server together: no fault can fall between them, and
 * the model's one request per operation is what they are (the kit's fault
 * layer sends each command as the driver hands it over, so a pipeline's
 * commands all leave at the same instant and their replies wait for the
 * same resume). Commands sent one after another's reply are separate round
 * trips: a pause can fall between them in reality, so the kit lets it, and
 * what follows is the library's. A lock of the test's own, whose release
 * sends GET and DEL three ways.
 */
let cluster: RedisCluster | undefined;
beforeAll(async () => {
  cluster = await startRedisCluster({ nodes: 1, persistence: 'none' });
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
}, 60_000);

type Release = 'pipeline' | 'multi' | 'separate';

/** SET NX PX to acquire (MULTI with a GET of the key in the same write); the release's GET and DEL as `release` says. */
function pairLock(release: Release): BackendUnderTest {
  return setNxLock(
    {
      name: `GET and DEL, ${release}`,
      acquire: 'multi',
      release: async (redis, key, lease) => {
        if (release === 'separate') {
          // The DEL goes out only once the GET's reply is read: two round trips.
          if ((await redis.get(key)) === lease.owner) await redis.del(key);
          return;
        }
        // In one write (unconditional: this lock is for the round trips only, not a lock to copy).
        await (release === 'multi' ? redis.multi() : redis.pipeline()).get(key).del(key).exec();
      },
    },
    cluster!,
  );
}

const run = (backend: BackendUnderTest, commands: readonly Command[]): Promise<RunReport> => runLockstep(backend, commands, { clients: 2, tokenBase: 0n });

/** A release sent just before its client pauses; the other client then asks for the lock. */
const pausedRelease: Command[] = [
  { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 50 },
  { kind: 'pause', client: 0, inFlight: { kind: 'release', client: 0, resource: 'r0' } },
  { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 50 },
];

describe('commands in one write are one round trip; separate round trips stay separate', () => {
  for (const release of ['pipeline', 'multi'] as const) {
    it(`${release}: a release sent before a pause deletes the key before it, as the model's one request does; the next client gets the lock`, async () => {
      const report = await run(pairLock(release), pausedRelease);
      expect(report.verdict.kind, textTimeline(report)).toBe('pass');
      expect(report.deviations ?? []).toEqual([]);
      expect(report.steps.map((s) => s.actual.kind)).toEqual(['granted', 'ok', 'granted']);
    }, 60_000);
  }

  it('a MULTI/EXEC acquire in flight across a pause sets its key before the pause: the other client is refused, as in the model', async () => {
    const report = await run(pairLock('multi'), [
      { kind: 'pause', client: 0, inFlight: { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 50 } },
      { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 50 },
      { kind: 'resume', client: 0 },
    ]);
    expect(report.verdict.kind, textTimeline(report)).toBe('pass');
    expect(report.steps.map((s) => s.actual.kind)).toEqual(['ok', 'denied', 'granted']);
  }, 60_000);

  it('GET, then DEL once its reply is read: the pause falls between them, so the key stays until the resume (reported: OWN-1, liveness)', async () => {
    const report = await run(pairLock('separate'), pausedRelease);
    expect(report.verdict.kind, textTimeline(report)).toBe('conformance-failure');
    expect(report.verdict).toMatchObject({ property: 'OWN-1', consequence: { kind: 'liveness' } });
  }, 60_000);
});
