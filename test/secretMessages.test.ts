import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../impl/errors.ts';
import { systemClock } from '../impl/clock.ts';
import { zookeeperNode } from '../impl/zookeeper/index.ts';
import { shown } from '../impl/options.ts';
import { describeThrown } from '../conformance/thrown.ts';
import { redactSecrets } from '../conformance/env/redact.ts';

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
