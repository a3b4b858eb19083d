import { describe, expect, it } from 'vitest';
import { refusal } from './probes.ts';
import { checkConnectString } from '../impl/zookeeper/connectString.ts';

/**
 * The ZooKeeper connect string as node-zookeeper-client reads it
 * (`host[:port][,host[:port]...][/chroot]`), checked because the library
 * checks almost nothing: every rule at its edge, each refusal by its
 * reason (mutation testing, session h34: the rules were tested only on a
 * few bad strings, never at their bounds).
 */
const WANTED = 'invalid-config: connectString must be host[:port][,host[:port]...][/chroot]';

describe('checkConnectString', () => {
  it.each(['h', 'h:1', 'h:65535', 'h:007', 'a,b:2', 'h.a-b:1/x/y', '10.0.0.1:2181/app'])('takes %j', (value) => {
    expect(checkConnectString(value)).toBe(value);
  });

  it.each([
    ['', 'a non-empty string', '""'],
    ['h:0', "server 1's port is not in 1..65535", '"h:0"'],
    ['h:65536', "server 1's port is not in 1..65535", '"h:65536"'],
    ['h:', "server 1's port is not in 1..65535", '"h:"'],
    ['h:1:2', 'server 1 is not host[:port]', '"h:1:2"'],
    ['-h', 'server 1 is not host[:port]', '"-h"'],
    ['h-', 'server 1 is not host[:port]', '"h-"'],
    ['h,', 'server 2 is not host[:port]', '"h,"'],
    ['/app', 'server 1 is not host[:port]', '"/app"'],
    ['h/', 'the chroot is not an absolute znode path without a trailing slash', '"h/"'],
    ['h/a/', 'the chroot is not an absolute znode path without a trailing slash', '"h/a/"'],
    ['h/a//b', 'the chroot is not an absolute znode path without a trailing slash', '"h/a//b"'],
  ])('refuses %j: %s', (value, why, shown) => {
    expect(refusal(() => checkConnectString(value)).message).toBe(`${WANTED} (${why}), got ${shown}`);
  });
});
