/**
 * How the Redis lock and store read an error reply (impl/redis/replyErrors.ts),
 * without a server: which code a reply carries, which replies are an outage
 * and which a refusal no retry fixes, and that credentials never ride along
 * on an error. Each case pins a reading a looser one would get wrong: codes
 * are the reply's first word (or a script-wrapped reply's), never a word
 * found later in the text.
 */
import { describe, expect, it } from 'vitest';
import { ConnectionConfigError, ServerRefusedError, TokenOverflowError, UnavailableError } from '../../impl/errors.ts';
import { isPassingState, replyCode, typed, withoutCredentials } from '../../impl/redis/replyErrors.ts';

const WRAPPED_READONLY = "ERR Error running script (call to f_1f8f): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica.";

describe('replyCode', () => {
  it("is the reply's first word, or the code a pre-7 script error wrapped; never a word later in the text", () => {
    expect(replyCode(WRAPPED_READONLY)).toBe('READONLY');
    expect(replyCode('LOADING Redis is loading the dataset in memory')).toBe('LOADING');
    expect(replyCode('ERR Error running script (call to f_1f8f): @user_script:1: attempt to compare nil with number')).toBe('ERR');
    // The wrapping counts only at the start: a reply of another code quoting it keeps its own.
    expect(replyCode(`WRONGTYPE quoted: ${WRAPPED_READONLY}`)).toBe('WRONGTYPE');
    // No capital word at the start: no code, whatever follows.
    expect(replyCode('connection lost; server said READONLY')).toBe('');
    expect(replyCode('')).toBe('');
    // A word, not a prefix of one.
    expect(replyCode('READONLYish')).toBe('');
    expect(replyCode(`ERR Error running script: -READONLYish`)).toBe('ERR');
  });

  it('passing states are outages: by code, not by a mention', () => {
    for (const code of ['LOADING', 'BUSY', 'MASTERDOWN', 'READONLY', 'MISCONF', 'OOM', 'NOREPLICAS', 'TRYAGAIN', 'CLUSTERDOWN', 'NOSCRIPT', 'UNBLOCKED']) {
      expect(isPassingState(`${code} now`), code).toBe(true);
    }
    expect(isPassingState(WRAPPED_READONLY)).toBe(true);
    expect(isPassingState('ERR not LOADING')).toBe(false);
    expect(isPassingState('NOPERM no')).toBe(false);
  });
});

describe('typed', () => {
  const error = (message: string): Error => new Error(message);

  it('types each refusal with the reply as its cause, and a passing state as UnavailableError', () => {
    const cases: Array<[string, new (...a: never[]) => Error, object]> = [
      ['LOADING Redis is loading', UnavailableError, { message: 'the node cannot grant for now: LOADING Redis is loading' }],
      [WRAPPED_READONLY, UnavailableError, {}],
      ['NOAUTH Authentication required.', ConnectionConfigError, { code: 'authentication' }],
      ['WRONGPASS invalid username-password pair', ConnectionConfigError, { code: 'authentication' }],
      ['NOPERM this user has no permissions', ServerRefusedError, { code: 'permission', serverCode: 'NOPERM', message: 'permission (NOPERM): NOPERM this user has no permissions' }],
      ['WRONGTYPE Operation against a key holding the wrong kind of value', ServerRefusedError, { code: 'schema', serverCode: 'WRONGTYPE' }],
      ['ERR Error running script (call to f_1): @user_script:1: -WRONGTYPE Operation against a key', ServerRefusedError, { code: 'schema', serverCode: 'WRONGTYPE' }],
      ['ERR value is not an integer or out of range', ServerRefusedError, { code: 'schema', serverCode: 'ERR' }],
      ['ERR Error running script (call to f_1): @user_script:1: attempt to compare nil', ServerRefusedError, { code: 'statement', serverCode: 'ERR' }],
      ['ERR unknown command `EVALSHA`', ServerRefusedError, { code: 'statement', serverCode: 'ERR' }],
      ['TOKENLOST the token counter k was deleted', ServerRefusedError, { code: 'schema', serverCode: 'TOKENLOST', message: "schema (TOKENLOST): 'res': the token counter k was deleted" }],
    ];
    for (const [message, type, fields] of cases) {
      const e = error(message);
      const t = typed(e, 'res');
      expect(t, message).toBeInstanceOf(type);
      expect(t, message).toMatchObject(fields);
      expect((t as Error).cause, message).toBe(e);
    }
    const overflow = typed(error('TOKENOVERFLOW the token counter is at 2^63-1'), 'res');
    expect(overflow).toBeInstanceOf(TokenOverflowError);
    expect(overflow).toMatchObject({ resource: 'res' });
  });

  it('a code only counts where the reply starts with it: a reply that mentions one later is passed on as it is', () => {
    for (const message of ['ERR said NOAUTH once', 'ERR said WRONGPASS once', 'ERR TOKENOVERFLOW quoted', 'ERR TOKENLOST quoted', 'ERR NOPERM quoted', 'ERR xWRONGTYPE glued', 'X ERR unknown command', 'X ERR Error running script', 'something else']) {
      const e = error(message);
      expect(typed(e, 'res'), message).toBe(e);
    }
    // WRONGTYPE counts after a space or a dash too (a script-wrapped reply).
    expect(typed(error('ERR x -WRONGTYPE y'), 'res')).toMatchObject({ serverCode: 'WRONGTYPE' });
    expect(typed(error('ERR x WRONGTYPE y'), 'res')).toMatchObject({ serverCode: 'WRONGTYPE' });
    // Not an Error: read by its text.
    expect(typed('NOPERM no', 'res')).toMatchObject({ serverCode: 'NOPERM' });
  });
});

describe('withoutCredentials', () => {
  it('replaces the arguments of a command that carries credentials, whatever its case, and leaves others alone', () => {
    for (const name of ['auth', 'AUTH', 'Hello', 'migrate', 'acl', 'CONFIG']) {
      const e = { command: { name, args: ['user', 's3cret'] } };
      withoutCredentials(e);
      expect(e.command.args, name).toEqual(['<redacted>', '<redacted>']);
    }
    const get = { command: { name: 'get', args: ['key'] } };
    withoutCredentials(get);
    expect(get.command.args).toEqual(['key']);
  });

  it('takes anything without throwing: no error, no command, a command of another shape', () => {
    const odd: unknown[] = [undefined, null, 'AUTH secret', 5, {}, { command: null }, { command: 'auth' }, { command: { name: 5, args: ['x'] } }, { command: { name: 'auth', args: 'secret' } }, { command: { name: 'auth' } }];
    for (const e of odd) expect(() => withoutCredentials(e), String(JSON.stringify(e))).not.toThrow();
    const text = { command: { name: 'auth', args: 'secret' } };
    withoutCredentials(text);
    expect(text.command.args).toBe('secret');
  });

  it('typed() redacts before it wraps: the cause carries no password', () => {
    const e = Object.assign(new Error('WRONGPASS invalid username-password pair'), { command: { name: 'auth', args: ['default', 's3cret'] } });
    const t = typed(e, 'res') as Error;
    expect(t).toBeInstanceOf(ConnectionConfigError);
    expect((t.cause as typeof e).command.args).toEqual(['<redacted>', '<redacted>']);
  });
});
