import { ConnectionConfigError, ServerRefusedError, TokenOverflowError, UnavailableError } from '../errors.ts';

/**
 * What a Redis error reply means to a lock client: a state of the server that
 * passes (an outage: a vote against), or a refusal no retry fixes.
 */

/**
 * Codes of replies a server gives only while it is in a passing state:
 * loading its dataset (LOADING), running a long script (BUSY), a replica
 * whose primary is gone or that is not yet promoted (MASTERDOWN, READONLY),
 * unable to persist or out of memory for now (MISCONF, OOM), short of
 * replicas (NOREPLICAS), a cluster in flux (TRYAGAIN, CLUSTERDOWN), a script
 * cache emptied by a restart (NOSCRIPT), a blocked call cut short
 * (UNBLOCKED). None says the lock is misconfigured, so none may be a
 * ServerRefusedError.
 */
const PASSING = new Set(['LOADING', 'BUSY', 'MASTERDOWN', 'READONLY', 'MISCONF', 'OOM', 'NOREPLICAS', 'TRYAGAIN', 'CLUSTERDOWN', 'NOSCRIPT', 'UNBLOCKED']);

/**
 * The code of an error reply: its first word; for the error of a command a
 * script called, as Redis before 7 wrapped it ("ERR Error running script
 * (call to f_...): @user_script:1: @user_script: 1: -READONLY You can't
 * write ..."), the wrapped reply's code. Redis 7 passes the called command's
 * reply on with its own code ("READONLY ... script: ..., on @user_script:1.").
 */
export function replyCode(message: string): string {
  const wrapped = /^ERR Error running script\b.*?: -([A-Z]+)\b/.exec(message);
  if (wrapped !== null) return wrapped[1]!;
  return /^[A-Z]+\b/.exec(message)?.[0] ?? '';
}

/** The reply says the server is in a passing state: an outage, never a refusal. */
export function isPassingState(message: string): boolean {
  return PASSING.has(replyCode(message));
}

/** Commands whose arguments carry credentials: AUTH, HELLO ... AUTH, MIGRATE ... AUTH, ACL SETUSER, CONFIG SET requirepass. */
const CREDENTIAL_COMMANDS = new Set(['auth', 'hello', 'migrate', 'acl', 'config']);

/**
 * ioredis keeps a failed command's name and arguments on its error
 * (`command`): a refused AUTH at connect keeps the password there, and the
 * error is passed on as a typed error's `cause`, so printing that error
 * (console.error, util.inspect, a logger's error serializer) showed the
 * password. For the commands that carry credentials the arguments are
 * replaced before the error goes anywhere.
 */
export function withoutCredentials(e: unknown): void {
  const command = typeof e === 'object' && e !== null ? (e as { command?: { name?: unknown; args?: unknown } }).command : undefined;
  if (typeof command !== 'object' || command === null || typeof command.name !== 'string' || !CREDENTIAL_COMMANDS.has(command.name.toLowerCase())) return;
  if (Array.isArray(command.args)) command.args = command.args.map(() => '<redacted>');
}

/**
 * Errors that say the node can never grant as configured, typed so that they
 * are not read as an outage; and replies of a server in a passing state
 * (loading, read-only, busy, ...: above), an UnavailableError
 * whatever wraps them, so that they are never read as a refusal.
 */
export function typed(e: unknown, resource: string): unknown {
  withoutCredentials(e);
  const message = e instanceof Error ? e.message : String(e);
  if (isPassingState(message)) return new UnavailableError(`the node cannot grant for now: ${message}`, { cause: e });
  if (/^(NOAUTH|WRONGPASS)/.test(message)) return new ConnectionConfigError('authentication', message, { cause: e });
  if (/^TOKENOVERFLOW/.test(message)) return new TokenOverflowError(resource);
  // The counter was deleted behind lockcheck (ACQUIRE): minting would repeat issued tokens until someone restores it.
  if (/^TOKENLOST/.test(message)) return new ServerRefusedError('schema', 'TOKENLOST', `'${resource}': ${message.slice('TOKENLOST '.length)}`, { cause: e });
  // An ACL without the scripts' commands or keys, or a script the server cannot run: no retry fixes these.
  if (/^NOPERM/.test(message)) return new ServerRefusedError('permission', 'NOPERM', message, { cause: e });
  // A key lockcheck uses holding data it did not write (a shared prefix, a hand edit): the wrong type, or a counter that is no integer.
  if (/(^|\s|-)WRONGTYPE\b/.test(message)) return new ServerRefusedError('schema', 'WRONGTYPE', message, { cause: e });
  if (/value is not an integer or out of range/.test(message)) return new ServerRefusedError('schema', 'ERR', message, { cause: e });
  if (/^ERR (Error running script|user_script|unknown command)/.test(message)) return new ServerRefusedError('statement', 'ERR', message, { cause: e });
  return e;
}
