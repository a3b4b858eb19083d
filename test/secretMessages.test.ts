import { describe, expect, it } from 'vitest';
import { refusal } from './probes.ts';
import { InvalidInputError } from '../impl/errors.ts';
import { systemClock } from '../impl/clock.ts';
import { zookeeperNode } from '../impl/zookeeper/index.ts';
import { shown } from '../impl/options.ts';
import { describeThrown } from '../conformance/thrown.ts';
import { redactSecrets } from '../conformance/env/redact.ts';
import { etcdClient } from '../impl/etcd/client.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { parseRedisUrl } from '../conformance/env/serverUrls.ts';
import { resolveBackend } from '../cli/backends.ts';
import { UsageError } from '../cli/usage.ts';
import { suiteOptionsFromEnv } from '../conformance/suite.ts';

/** A refused value that may hold a password is shown by its kind alone, whatever form the password came in. */
describe('shown: values that may carry a password are shown by kind', () => {
  it.each([
    ['user:password@host without a scheme', 'app:Xq7zz@zk1:2181'],
    ["a URL whose password holds a '/'", 'postgres://app:Xq7/zz@db/x'],
  ])('%s', (_what, value) => {
    expect(shown(value)).not.toMatch(/Xq7|zz/);
    expect(shown(value)).toMatch(/not shown/);
  });

  it('a connection string, whatever it holds', () => {
    expect(shown('host=db user=app', 'connection.connectionString')).toMatch(/not shown/);
  });

  it("zookeeperNode's connectString with user info is refused without its password", () => {
    let thrown: unknown;
    try {
      zookeeperNode({ connectString: 'app:Xq7zz@127.0.0.1:2181', clock: systemClock });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(InvalidInputError);
    expect((thrown as Error).message).not.toMatch(/Xq7|zz/);
  });
});

describe('describeThrown: a thrown value is redacted before it is cut short', () => {
  it('a thrown options object whose password the cut would leave without its closing quote', () => {
    // The cut falls inside the password's value: redacted afterwards, an unterminated "…" matched no pattern.
    const thrown = { host: 'h'.repeat(170), password: 'Xq7zz-Xq7zz-Xq7zz-Xq7zz' };
    const text = describeThrown(thrown);
    expect(redactSecrets(text)).not.toMatch(/Xq7/);
    expect(text).not.toMatch(/Xq7/);
  });
});

/** Host lists and connect strings: a refused one never shows what may be a password, and never a control character raw. */
describe('refused host lists, connect strings and server settings show no password', () => {
  const message = (f: () => unknown): string => refusal(f).message;
  // oxlint-disable-next-line no-control-regex -- the control characters are what it looks for
  const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

  it.each([
    ['user:password typed as host:port', 'app:Xq7zz'],
    ['user:password@host with a space in the password', 'app:Xq7 zz@h:2379'],
    ['a port that is a word', 'h:Xq7zz'],
    ['a password with a slash', 'app:Xq7/zz@h:2379'],
  ])('etcd hosts: %s', (_what, host) => {
    const m = message(() => etcdClient({ hosts: [host] }));
    expect(m).toMatch(/^invalid-config: hosts\[0\] must be /);
    expect(m).not.toMatch(/Xq7|zz/);
  });

  it.each([
    ['user:password typed as host:port', 'app:Xq7zz'],
    ['user:password@host with a space in the password', 'app:Xq7 zz@h:2181'],
    ['a password with a slash (read as a chroot)', 'app:Xq7/zz@h:2181'],
    ['a chroot after a password', 'h:Xq7zz/x/'],
  ])('zookeeper connectString: %s', (_what, connectString) => {
    const m = message(() => zookeeperNode({ connectString, clock: systemClock }));
    expect(m).toMatch(/^invalid-config: connectString must be /);
    expect(m).not.toMatch(/Xq7|zz/);
  });

  it('control characters in a refused host or connect string are escaped', () => {
    expect(message(() => etcdClient({ hosts: ['h\u202e:1\u001b'] }))).not.toMatch(RAW_CONTROL);
    expect(message(() => zookeeperNode({ connectString: 'h:1/a\u202e/', clock: systemClock }))).not.toMatch(RAW_CONTROL);
    expect(message(() => zookeeperNode({ connectString: 'h\u2028:1', clock: systemClock }))).not.toMatch(RAW_CONTROL);
  });

  it.each([
    ['a secret-named setting with a newline', { ssl_passphrase_command: 'echo Xq7zz\nx' }],
    ['a secret-named setting with a NUL', { password_encryption: 'Xq7zz\u0000' }],
  ])('PostgresServer settings: %s', async (_what, settings) => {
    const e = await PostgresServer.start({ settings }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as Error).message).toMatch(/settings\.\w+/);
    expect((e as Error).message).not.toMatch(/Xq7|zz/);
    expect((e as Error).message).not.toMatch(RAW_CONTROL);
  });

  it('PostgresServer settings: a value or name with a control character is shown escaped', async () => {
    for (const settings of [{ work_mem: '1\u202e\n' }, { ['bad\u202ename']: 1 }] as Record<string, string | number>[]) {
      const e = await PostgresServer.start({ settings }).then(
        () => null,
        (error: unknown) => error,
      );
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as Error).message).not.toMatch(RAW_CONTROL);
    }
  });
});

describe('other refusals that echo what the user typed', () => {
  it('a server URL given as --backend is named redacted, not as a path holding its password', async () => {
    const e = await resolveBackend('redis://:Xq7zz@h:1', {} as never).then(
      () => null,
      (error: unknown) => error,
    );
    expect(e).toBeInstanceOf(UsageError);
    expect((e as Error).message).not.toMatch(/Xq7|zz/);
    expect((e as Error).message).toContain('redis://h:1');
  });

  it("a Redis URL's path that is not a database number is shown only when it is a plain word", () => {
    expect(() => parseRedisUrl('redis://h:1/Xq7:zz')).toThrow(/the path must be a database number, got 6 characters \(not shown/);
    expect(() => parseRedisUrl('redis://h:1/db')).toThrow(/the path must be a database number, got 'db'/);
  });

  it('a bad LOCKCHECK_* variable is quoted redacted and escaped', () => {
    const m = (env: Record<string, string>): string => {
      try {
        suiteOptionsFromEnv({}, env);
      } catch (e) {
        return (e as Error).message;
      }
      throw new Error('not refused');
    };
    expect(m({ LOCKCHECK_RUNS: 'password=Xq7zz \u202e' })).toMatch(/^invalid-config: LOCKCHECK_RUNS must be .*, got 'password=<redacted> \\u202e'$/);
    expect(m({ LOCKCHECK_FAULTS: 'pause,\u001b]0;x' })).toMatch(/unknown fault '\\x1b\]0;x'/);
  });

  it('a string a refusal quotes has its bidirectional controls and separators escaped', () => {
    expect(shown('a\u202eb\u2028c\u0085')).toBe('"a\\u202eb\\u2028c\\u0085"');
  });
});
