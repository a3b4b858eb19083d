import { Redis } from 'ioredis';
import { allSettledFirst } from './allOrNothing.ts';
import { EnvironmentError } from './faketime.ts';
import { redactUrl } from './redact.ts';
import { checkUrlText } from '../kitInput.ts';
import type { RedisCluster, RedisTarget } from './redisBackend.ts';
import { refuse } from '../../impl/options.ts';
import { ServerUrlError, parseRedisUrl } from './serverUrls.ts';

export { ServerUrlError, checkPort, parseRedisUrl, unparseableUrl } from './serverUrls.ts';
import { valueWithin } from '../realTimeLimit.ts';

/**
 * The user's own Redis servers as a RedisCluster (`lockcheck --redis`):
 * checked before any run (reachable, a plain server rather than Redis
 * Cluster, no two URLs naming the same database), then used without a
 * FLUSHALL, a restart or a clock of theirs touched; see startRedisRun.
 */

/** What the check found about one server. */
export interface RedisServerInfo {
  /** The URL without its password, for messages. */
  readonly shown: string;
  /** The server's redis_version. */
  readonly version: string;
  /** Round trip of a PING, median of a few, in ms. */
  readonly rttMs: number;
}

/** The user's own Redis servers (`--redis`) as a RedisCluster, after connectRedisCluster checked them. */
export interface UserRedisCluster extends RedisCluster {
  /** What the check found about each server, in the order of the URLs. */
  readonly servers: readonly RedisServerInfo[];
}

const CHECK_TIMEOUT_MS = 5_000;

/** A driver's timeout message ("Command timed out", "timeout expired") with the bound said: ` (no answer within 5 s)`. */
export function timedOut(e: unknown): string {
  return e instanceof Error && /time(d)? ?out|timeout/i.test(e.message) ? ` (no answer within ${CHECK_TIMEOUT_MS / 1000} s)` : '';
}

/**
 * A URL without a password takes REDISCLI_AUTH's, as redis-cli does: a
 * password there is not on the command line, which every local user can read.
 */
function withEnvironmentPassword(url: URL): URL {
  const password = process.env['REDISCLI_AUTH'];
  if (url.password !== '' || url.searchParams.has('password') || password === undefined || password === '') return url;
  const withPassword = new URL(url.href);
  withPassword.password = encodeURIComponent(password);
  return withPassword;
}

/** Checks every server and returns them as a cluster: the first URL also holds the store. */
export async function connectRedisCluster(urls: readonly string[]): Promise<UserRedisCluster> {
  if (!Array.isArray(urls)) refuse('urls', 'an array of redis:// URLs', urls);
  if (urls.length === 0) throw new ServerUrlError('--redis needs at least one URL');
  // Array.from: every index, holes included (forEach skips them).
  Array.from(urls).forEach((u, i) => checkUrlText(u, `urls[${i}]`));
  const parsed = urls.map(parseRedisUrl).map(withEnvironmentPassword);
  // Every check ended before a failure is thrown: none is left connecting behind the rejection.
  const checked = await allSettledFirst(parsed.map(check));
  const seen = new Map<string, number>();
  checked.forEach((c, i) => {
    const earlier = seen.get(c.identity);
    if (earlier !== undefined) throw new ServerUrlError(`${redactUrl(parsed[earlier]!)} and ${redactUrl(parsed[i]!)} are the same server and database: every node must be independent`);
    seen.set(c.identity, i);
  });
  const nodes: RedisTarget[] = parsed.map((u) => ({ url: u.href }));
  return {
    nodes,
    store: nodes[0]!,
    persistence: 'unknown',
    servers: checked.map((c) => c.info),
    stop: async () => undefined,
  };
}

async function check(url: URL): Promise<{ readonly identity: string; readonly info: RedisServerInfo }> {
  const shown = redactUrl(url);
  const redis = new Redis(url.href, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: CHECK_TIMEOUT_MS,
    commandTimeout: CHECK_TIMEOUT_MS,
    retryStrategy: () => null,
  });
  // ioredis reports a refused password as an 'error' event and then only "Connection is closed": keep the first.
  let firstError: Error | null = null;
  redis.on('error', (e: Error) => {
    firstError ??= e;
  });
  try {
    let connected;
    try {
      // Bounded as a whole: a server that accepts the connection and never answers took ioredis some 12 s, ending in "Command timed out".
      connected = await valueWithin(redis.connect(), CHECK_TIMEOUT_MS);
    } catch (e) {
      const why = (firstError as Error | null) ?? (e as Error);
      if (/^(WRONGPASS|NOAUTH)/.test(why.message)) throw new EnvironmentError(`the Redis server ${shown} refused the credentials: ${why.message}`);
      throw new EnvironmentError(`cannot reach the Redis server ${shown}: ${why.message}${timedOut(why)}`);
    }
    if (!connected.done) throw new EnvironmentError(`cannot reach the Redis server ${shown}: no answer within ${CHECK_TIMEOUT_MS / 1000} s`);
    const info = await redis.info('server');
    const field = (name: string): string => new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim() ?? '';
    if ((await redis.info('cluster')).includes('cluster_enabled:1')) {
      throw new ServerUrlError(`${shown} is a Redis Cluster node: a lock node must be a plain server (its lock and token keys live in one script)`);
    }
    const rtts: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      await redis.ping();
      rtts.push(performance.now() - t0);
    }
    rtts.sort((a, b) => a - b);
    const db = url.pathname.replace(/^\//, '') || '0';
    return { identity: `${field('run_id')}/${db}`, info: { shown, version: field('redis_version') || 'unknown', rttMs: rtts[2]! } };
  } catch (e) {
    if (e instanceof EnvironmentError || e instanceof ServerUrlError) throw e;
    throw new EnvironmentError(`the Redis server ${shown} did not answer lockcheck's checks: ${(e as Error).message}${timedOut(e)}`);
  } finally {
    redis.disconnect();
  }
}
