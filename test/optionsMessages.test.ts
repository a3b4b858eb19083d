import { describe, expect, it } from 'vitest';
import { systemClock } from '../impl/clock.ts';
import { etcdClient, EtcdLock } from '../impl/etcd/index.ts';
import { shown } from '../impl/options.ts';
import { redisFencedStore } from '../impl/redis/index.ts';
import { zookeeperNode } from '../impl/zookeeper/index.ts';
import { refusal } from './probes.ts';

/**
 * What a refused option's message shows, exactly (impl/options.ts): the
 * value itself where it cannot hold a secret, only its kind where it may
 * (an option named like a secret; text with user info or a secret-named
 * key; a refused host list longer than 60 characters), and in a refused
 * host list each port that is not a number hidden. Mutation testing
 * (session h34) found these checks only half held: the tests asked that no
 * password show, which either of two layers of redaction gives, so a mutant
 * that removed one layer survived. A token typed as user info without a
 * colon (`token@host:2379`) is what only the first layer hides.
 */

const message = (f: () => unknown): string => refusal(f).message;
const HIDDEN = '(not shown: it may hold a secret)';

describe('a refused etcd host', () => {
  const refused = (host: string): string => message(() => etcdClient({ hosts: [host] })).replace(/^invalid-config: hosts\[0\] must be http:\/\/host:port, https:\/\/host:port or host:port with a port in 1\.\.65535, got /, '');

  it.each([
    ['a five-digit port out of range: shown as it is', 'h:99999', '"h:99999"'],
    ['an empty port: shown as it is', 'h:', '"h:"'],
    ['a six-digit port: hidden, it is no port', 'h:123456', '"h:<redacted>"'],
    ['a word for a port (a password typed as host:port): hidden, the scheme kept', 'https://h:Xq7zz', '"https://h:<redacted>"'],
    ['a bracketed IPv6 address kept, the word after it hidden', '[::1]:Xq7zz', '"[::1]:<redacted>"'],
    ['brackets around what is no address: hidden', '[Xq7zz]:2379', '"[<redacted>]:2379"'],
    ['a list in one string: each port judged', 'a,b:Xq7zz', '"a,b:<redacted>"'],
    ['60 characters: shown', `${'h'.repeat(58)}:0`, `"${'h'.repeat(58)}:0"`],
  ])('%s', (_what, host, shownAs) => {
    expect(refused(host)).toBe(shownAs);
  });

  it.each([
    ['a token as user info, with no colon before the @', 'Xq7zz@h:2379', 12],
    ['user:password@host', 'app:Xq7zz@h:2379', 16],
    ['a secret-named key with a value', 'password=Xq7zz', 14],
    ['61 characters', `${'h'.repeat(59)}:0`, 61],
  ])('%s: only its kind', (_what, host, length) => {
    expect(refused(host)).toBe(`a string of ${length} characters ${HIDDEN}`);
  });

  it('hosts that are not an array: the string shown as a refused host list is', () => {
    expect(message(() => etcdClient({ hosts: 'h:1' as never }))).toBe('invalid-config: hosts must be a non-empty array of URLs, got "h:1"');
    expect(message(() => etcdClient({ hosts: 'Xq7zz@h:1' as never }))).toBe(`invalid-config: hosts must be a non-empty array of URLs, got a string of 9 characters ${HIDDEN}`);
  });
});

describe('a refused ZooKeeper connect string', () => {
  const refused = (connectString: string): string => message(() => zookeeperNode({ connectString, clock: systemClock })).replace(/^invalid-config: connectString must be host\[:port\]\[,host\[:port\]\.\.\.\]\[\/chroot\] \([^)]*\), got /, '');

  it.each([
    ['the second server\'s port a word: hidden, the first kept', 'h:2181,k:Xq7zz', '"h:2181,k:<redacted>"'],
    ['a port with a letter: hidden', 'h:99999x', '"h:<redacted>"'],
    ['a word after an IPv6 address, before a chroot: hidden, the chroot kept', '[::1]:x1/ch', '"[::1]:<redacted>/ch"'],
    ['brackets around what is no address: hidden', '[Xq7zz]:2181', '"[<redacted>]:2181"'],
  ])('%s', (_what, connectString, shownAs) => {
    expect(refused(connectString)).toBe(shownAs);
  });

  it.each([
    ['a token as user info', 'Xq7zz@h:2181', 12],
    ['a secret-named key with a value', 'password=Xq7zz', 14],
  ])('%s: only its kind', (_what, connectString, length) => {
    expect(refused(connectString)).toBe(`a string of ${length} characters ${HIDDEN}`);
  });
});

describe('shown: a value in a message', () => {
  it.each([
    ['null', null],
    ['an array of 2', [1, 2]],
    ['a number', 5],
    ['a string of 3 characters', 'abc'],
    ['undefined', undefined],
    ['an object', { a: 1 }],
    ['a boolean', true],
    ['a bigint', 7n],
  ])('of an option named like a secret: only its kind (%s)', (kind, value) => {
    expect(shown(value, 'password')).toBe(`${kind} ${HIDDEN}`);
    expect(shown(value, 'ttlMs')).not.toContain('not shown');
  });

  it('of any other option: the value itself, short; text with a password in it only by its kind', () => {
    expect(shown(-5, 'ttlMs')).toBe('-5');
    expect(shown('abc', 'keyPrefix')).toBe('"abc"');
    expect(shown(null, 'keyPrefix')).toBe('null');
    expect(shown('redis://app:Xq7zz@h:6379', 'url')).toBe(`a string of 24 characters ${HIDDEN}`);
    expect(shown('redis://app:Xq7zz@h:6379')).toBe(`a string of 24 characters ${HIDDEN}`);
  });
});

describe('other refusals, by their exact text', () => {
  it('an empty ZooKeeper auth scheme: a non-empty string wanted; credentials that are no string: a string wanted, their value not shown', () => {
    expect(message(() => zookeeperNode({ connectString: '127.0.0.1:1', clock: systemClock, auth: [{ scheme: '', credentials: 'x' }] }))).toBe('invalid-config: auth[0].scheme must be a non-empty string, got ""');
    expect(message(() => zookeeperNode({ connectString: '127.0.0.1:1', clock: systemClock, auth: [{ scheme: 'digest', credentials: 904413 as never }] }))).toBe(`invalid-config: auth[0].credentials must be a string, got a number ${HIDDEN}`);
  });

  it('a store policy no store has: the policies listed', () => {
    // Only the methods are looked at: nothing is sent.
    const redis = { options: {}, hmget: () => Promise.resolve([]), evalsha: () => Promise.resolve(null), eval: () => Promise.resolve(null), sendCommand: () => undefined, call: () => Promise.resolve(null) };
    expect(message(() => redisFencedStore(redis as never, 'lax' as never))).toBe('invalid-config: policy must be one of unfenced, strict, monotonic, got "lax"');
  });

  it('a node that is none: what it must have, and what it lacks', () => {
    const wanted = 'invalid-config: node must be an EtcdNode (with grant(), putIfAbsent(), keepAlive(), owns(), deleteIfOwned(), revoke())';
    expect(message(() => new EtcdLock({ node: 5 as never, clock: systemClock }))).toBe(`${wanted}, got 5`);
    expect(message(() => new EtcdLock({ node: { grant: () => undefined } as never, clock: systemClock }))).toBe(`${wanted}, got an object without putIfAbsent(), keepAlive(), owns(), deleteIfOwned(), revoke()`);
  });
});
