/**
 * The backends' readiness waits keep to their deadline against a server that
 * accepts and never answers (a TcpProxy in blackhole mode): each attempt and
 * each pause is cut to what is left (deadline.ts), so the wait ends at its
 * deadline plus a small slack, with a typed error; and RedisReplicated's
 * wait ends once a server is stopped, not at its bound.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../impl/clock.ts';
import { etcdClient } from '../impl/etcd/client.ts';
import { zookeeperNode } from '../impl/zookeeper/node.ts';
import { etcdClientReady } from '../conformance/env/etcdBackend.ts';
import { pollUntil } from '../conformance/env/redisReplicated.ts';
import { sendCommand } from '../conformance/env/resp.ts';
import { RunEnvironmentError } from '../conformance/env/runEnvironment.ts';
import { EnvironmentError } from '../conformance/env/faketime.ts';
import { StoppedWhileStarting } from '../conformance/env/stoppedWhileStarting.ts';
import { TcpProxy } from '../conformance/env/proxy.ts';
import { zookeeperSessionsReady } from '../conformance/env/zookeeperBackend.ts';
import { settles } from './impl/blackhole.ts';

/**
 * The wait's bound. Each attempt's own bound starts again inside it: the node's 20 s (ZooKeeper), 10 s commands
 * (Redis, given here), so a wait that does not cut its last attempt ends seconds past it; etcd's internal 1 s cap is
 * judged by the deadline each read is given instead (below).
 */
const TIMEOUT_MS = 1200;
/** What a loaded 2-core machine may add to a wait that keeps to its deadline: far below what an uncut attempt adds. */
const SLACK_MS = 5000;

/** A wait that failed with `error` at its deadline, within the slack. */
function endedAtDeadline(s: Awaited<ReturnType<typeof settles>>, error: new (...args: never[]) => Error): void {
  expect(s.ok).toBe(false);
  if (!s.ok) expect(s.error).toBeInstanceOf(error);
  expect(s.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
  expect(s.ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
}

let hole: TcpProxy;

beforeAll(async () => {
  // Accepts every connection and forwards nothing either way: nothing answers.
  hole = await TcpProxy.start({ host: '127.0.0.1', port: 9 });
  hole.setMode({ kind: 'blackhole' });
});

afterAll(async () => {
  await hole.close();
});

describe('readiness waits against a server that never answers', () => {
  it("etcd: the client's read wait ends at its deadline, RunEnvironmentError", async () => {
    const client = etcdClient({ hosts: [`127.0.0.1:${hole.port}`] });
    // The deadline each read is sent with, against the wait's own: an uncut read (its 1 s cap) goes about 0.85 s past it.
    const sentPast: number[] = [];
    let waitDeadline = 0;
    const range = client.kv.range.bind(client.kv);
    client.kv.range = (req, options) => {
      const d = options?.deadline;
      sentPast.push((d instanceof Date ? d.getTime() : Number(d)) - waitDeadline);
      return range(req, options);
    };
    try {
      waitDeadline = Date.now() + TIMEOUT_MS;
      const s = await settles('etcdClientReady', etcdClientReady(client, TIMEOUT_MS), 10_000);
      endedAtDeadline(s, RunEnvironmentError);
      expect(sentPast.length).toBeGreaterThan(0);
      // Date.now() read twice as a read is sent: a few ms, more when the process waits for the CPU between the two (it can
      // wait 100 ms at load 38). An uncut read goes 800 ms past at least: the second read starts a whole first read
      // (1 s, unanswered) into the 1.2 s wait.
      for (const past of sentPast) expect(past).toBeLessThanOrEqual(500);
    } finally {
      client.close();
    }
  }, 30_000);

  it("ZooKeeper: the sessions' read wait ends at its deadline, not at the node's own 20 s call bound, RunEnvironmentError", async () => {
    const node = zookeeperNode({ connectString: `127.0.0.1:${hole.port}`, clock: systemClock, requestTimeoutMs: 20_000 });
    try {
      const s = await settles('zookeeperSessionsReady', zookeeperSessionsReady([node], '/lockcheck/ready', TIMEOUT_MS), 30_000);
      endedAtDeadline(s, RunEnvironmentError);
    } finally {
      node.close();
    }
  }, 60_000);

  it("RedisReplicated: a wait whose checks (10 s commands) get no answer ends at its deadline, EnvironmentError", async () => {
    const ping = async (): Promise<boolean> => (await sendCommand('127.0.0.1', hole.port, ['PING'], 10_000)) === 'PONG';
    const s = await settles('pollUntil', pollUntil(TIMEOUT_MS, 'a PONG', ping, () => '', () => false), 30_000);
    endedAtDeadline(s, EnvironmentError);
  }, 30_000);

  it('RedisReplicated: a wait of 60 s ends after the check in flight once a server is stopped, StoppedWhileStarting', async () => {
    const ping = async (): Promise<boolean> => (await sendCommand('127.0.0.1', hole.port, ['PING'], 1000)) === 'PONG';
    let looks = 0;
    // Stopped as the first check runs: the wait sees it at its next look.
    const stopped = (): boolean => looks++ > 0;
    const s = await settles('pollUntil', pollUntil(60_000, 'a PONG', ping, () => '', stopped), 30_000);
    expect(s.ok).toBe(false);
    if (!s.ok) expect(s.error).toBeInstanceOf(StoppedWhileStarting);
    // The check in flight ends at its 1 s; the wait that misses the stop runs on to its 60 s.
    expect(s.ms).toBeLessThan(1000 + SLACK_MS);
  }, 60_000);
});
