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

const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

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

  // Every znode of the lock and the store goes under the chroot: held to the root's rules. A '.' or '..' component was
  // asserted on by the library at each call (every acquire denied no-quorum, every store call an UnavailableError); a
  // chroot in /zookeeper put the lock among ZooKeeper's quotas, which the root option refuses; a character ZooKeeper
  // refuses was "the chroot does not exist (create it first)", which no one can.
  const TAKES = "the chroot must be a znode path ZooKeeper takes (no control characters, no '.' or '..' component, no character in U+D800..U+F8FF or U+FFF0..U+FFFF)";
  it.each([
    ['h/..', TAKES],
    ['h/.', TAKES],
    ['h:1/a/..', TAKES],
    ['h/a/./b', TAKES],
    ['h/a\u0001', TAKES],
    ['h/a\u007f', TAKES],
    ['h/\u{1f600}', TAKES],
    ['h/a\ufff0', TAKES],
    ['h/zookeeper', "the chroot must not be ZooKeeper's own /zookeeper subtree"],
    ['h/zookeeper/quota', "the chroot must not be ZooKeeper's own /zookeeper subtree"],
  ])('refuses the chroot of %j: %s', (value, why) => {
    expect(refusal(() => checkConnectString(value)).message).toMatch(new RegExp(`^${escape(`${WANTED} (${why}), got `)}`));
  });

  it.each(['h/...', 'h/.a', 'h/a.', 'h/zookeeperx', 'h/a/zookeeper', 'h/\u00e9t\u00e9'])('takes the chroot of %j', (value) => {
    expect(checkConnectString(value)).toBe(value);
  });
});
