// redis-lock 1.0.0 ships no types: what its index.js takes and gives (node-redis v4 client, lock(name, timeout) -> done).
declare module 'redis-lock' {
  interface NodeRedisV4Client {
    readonly v4: unknown;
    set(key: string, value: number | string, options: { PX: number; NX: true }): Promise<string | null>;
    del(key: string): Promise<number>;
  }
  /** Acquires `lock.<name>` for `timeout` ms (default 5000), retrying every retryDelay ms until it does; resolves to done(), which releases it. */
  type Lock = (name: string, timeout?: number) => Promise<() => Promise<unknown>>;
  function redisLock(client: NodeRedisV4Client, retryDelay?: number): Lock;
  export default redisLock;
}
