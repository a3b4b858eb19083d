import type { RedisConnection } from './connection.ts';

/**
 * Commands sent on one connection within one tick go out in one write. A
 * lock round answers many loops at once (their replies arrive in one read),
 * and each loop's next command would otherwise be a write system call of
 * its own: under 50 concurrent loops those writes were most of the client's
 * CPU (bench/profileRedis.ts), and the server reads them in one call too.
 * The socket is corked before the first command of a tick and uncorked
 * when the tick ends (process.nextTick runs after the promise callbacks that
 * send the commands); the order of commands on the connection is unchanged.
 * Only while commands await replies: a command sent on an idle connection is
 * most likely alone in its tick (a sequential caller), and a plain write
 * costs it less than the cork. A connection that is not open has no socket
 * to cork: its commands take ioredis's own path (offline queue or an error).
 */
export function tickWrites(redis: RedisConnection): () => void {
  let corked: { uncork(): void } | null = null;
  const uncork = (): void => {
    corked!.uncork();
    corked = null;
  };
  return () => {
    if (corked !== null) return;
    const stream = redis.stream;
    if (stream === undefined || redis.status !== 'ready' || redis.commandQueue.length === 0) return;
    stream.cork();
    corked = stream;
    process.nextTick(uncork);
  };
}
