/**
 * What lockcheck's Redis lock and store use of an ioredis connection, as a
 * structural type: a `Redis` of ioredis 5 or of ioredis 6 (or a subclass of
 * either) fits, whichever copy of ioredis the caller's own code imports. The
 * scripts' commands are built from the connection's own ioredis
 * (impl/redis/commands.ts), not from the copy lockcheck depends on.
 */
export interface RedisConnection {
  /** Read for the key prefix. */
  readonly options: { readonly keyPrefix?: string | undefined };
  /** Where the scripts' commands go (an ioredis Command of the connection's own ioredis). */
  sendCommand(command: object): unknown;
  /** For WAIT. */
  call(command: string, ...args: string[]): Promise<unknown>;
  /** Read by tickWrites (impl/redis/tickWrites.ts), to cork the socket while commands await replies. */
  readonly status: string;
  readonly stream?: { cork(): void; uncork(): void } | undefined;
  readonly commandQueue: { readonly length: number };
}

/** A connection as the fenced store uses it: also HMGET, for reads. */
export interface RedisStoreConnection extends RedisConnection {
  hmget(key: string, ...fields: string[]): Promise<(string | null)[]>;
}
