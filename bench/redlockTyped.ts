/**
 * redlock@5.0.0-beta.2 with types. The package ships dist/index.d.ts, but its
 * package.json "exports" map hides it from NodeNext resolution (TS7016), and a
 * tsconfig `paths` mapping would break tsx at run time. So this one file imports
 * the runtime class untyped and re-exports it with the few members the
 * benchmark uses declared by hand (signatures copied from redlock's own d.ts).
 * Should redlock's types ever resolve, the @ts-expect-error below fails the
 * typecheck: then import from 'redlock' directly and delete this file.
 */
import type { Redis } from 'ioredis';
// @ts-expect-error TS7016: redlock's "exports" map hides its dist/index.d.ts; the members used are declared below.
import RedlockRuntime from 'redlock';

export interface RedlockSettings {
  readonly driftFactor: number;
  readonly retryCount: number;
  readonly retryDelay: number;
  readonly retryJitter: number;
  readonly automaticExtensionThreshold: number;
}

export interface RedlockLock {
  readonly resources: string[];
  readonly value: string;
  /** Wall-clock ms (Date.now()) after which redlock considers the lock expired. */
  expiration: number;
  /** Resolves once a quorum released; rejects (ExecutionError) when no quorum could be reached. */
  release(): Promise<unknown>;
}

export interface Redlock {
  /** Resolves as soon as a quorum granted; rejects (ExecutionError) otherwise. */
  acquire(resources: string[], duration: number, settings?: Partial<RedlockSettings>): Promise<RedlockLock>;
  /** Every failed per-node call is emitted as 'error'; without a listener the emit throws. */
  on(event: 'error', listener: (error: Error) => void): this;
}

export interface RedlockConstructor {
  new (clients: Iterable<Redis>, settings?: Partial<RedlockSettings>): Redlock;
}

export const Redlock: RedlockConstructor = RedlockRuntime;
export default Redlock;
