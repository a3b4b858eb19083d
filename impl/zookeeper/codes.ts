import zookeeper from 'node-zookeeper-client';
import type { Exception } from 'node-zookeeper-client';

/**
 * ZooKeeper's reply codes that node-zookeeper-client 1.1 does not know
 * (KeeperException.Code of ZooKeeper 3.5 to 3.9), by the names ZooKeeper
 * gives them.
 */
export const LATER_CODES = {
  UNKNOWN_SESSION: -12,
  NEW_CONFIG_NO_QUORUM: -13,
  RECONFIG_IN_PROGRESS: -14,
  SESSION_MOVED: -118,
  NOT_READONLY: -119,
  EPHEMERAL_ON_LOCAL_SESSION: -120,
  NO_WATCHER: -121,
  REQUEST_TIMEOUT: -122,
  RECONFIG_DISABLED: -123,
  /** ZooKeeper 3.7+ with `enforce.auth.enabled`: the session presented no credentials of the schemes it requires. */
  SESSION_CLOSED_REQUIRE_SASL_AUTH: -124,
  QUOTA_EXCEEDED: -125,
  THROTTLED_OP: -127,
} as const satisfies Readonly<Record<string, number>>;

interface ExceptionModule {
  create(code: number, path?: string): Exception;
  readonly prototype: object;
}

let taught = false;

/**
 * Makes node-zookeeper-client answer a request with a code it does not know
 * as it answers one it knows (an Exception with that code), once per
 * process. It threw 'Unknown code' from its socket's data handler instead:
 * the request that got the reply was never answered, and waited out its
 * whole bound (an ensemble enforcing authentication answered every request
 * of a client without credentials so: each acquire `timed-out`, each store
 * call a TimeoutError, never the refusal it was).
 */
export function teachLaterCodes(): void {
  if (taught) return;
  taught = true;
  const exceptions = zookeeper.Exception as unknown as ExceptionModule;
  const create = exceptions.create.bind(exceptions);
  const names = new Map<number, string>(Object.entries(LATER_CODES).map(([name, code]) => [code, name]));
  const taughtCreate = (code: number, path?: string): Exception => {
    try {
      return create(code, path);
    } catch (error) {
      // Its own check of the code (validateCode) is all that throws: any code it does not know gets an Exception too.
      if (typeof code !== 'number') throw error;
      const name = names.get(code) ?? `UNKNOWN_CODE_${String(code)}`;
      const made = Object.create(exceptions.prototype) as { code: number; name: string; path?: string; message: string };
      Error.captureStackTrace(made, taughtCreate);
      made.code = code;
      made.name = name;
      made.path = path;
      made.message = `Exception: ${name}[${String(code)}]${path === undefined ? '' : `@${path}`}`;
      return made as unknown as Exception;
    }
  };
  exceptions.create = taughtCreate;
}
