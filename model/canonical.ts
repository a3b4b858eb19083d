import { read } from './clock.ts';
import { checkKnownKeys, checkOptions, refuse } from './checks.ts';
import { checkWorld } from './worldCheck.ts';
import { expiryNow } from './node.ts';
import type { NodeState, World } from './state.ts';
import { inFlightKey } from './state.ts';

/**
 * A string that is equal for two states exactly when no future behaviour can
 * tell them apart, up to two symmetries: a shift of true time (all times are
 * kept relative to now, expired deadlines collapsed to -1) and a permutation
 * of the lock-service nodes other than node 0 (every design treats its nodes
 * alike; fault alphabets single out node 0 as the faulty one, so it keeps its
 * place). The exploration deduplicates visited states by it.
 */
export function canonicalKey(world: World, options: { readonly nodeSymmetry?: boolean } = {}): string {
  checkWorld(world, 'canonicalKey world');
  checkOptions(options, 'canonicalKey options');
  if (options !== undefined) {
    checkKnownKeys(options, 'canonicalKey options', ['nodeSymmetry']);
    if (options.nodeSymmetry !== undefined && typeof options.nodeSymmetry !== 'boolean') refuse('canonicalKey options.nodeSymmetry', 'a boolean or absent', options.nodeSymmetry);
  }
  const now = world.nowMs;
  const design = world.config.design;
  const nodes = world.nodes.map((n, index) => {
    const expiry = expiryNow(design, n, now);
    const keysOf = (keys: NodeState['keys']): string[] =>
      Object.entries(keys)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([r, k]) => {
          const remaining = k.expiresAtMs === null ? 'session' : Math.max(-1 - (world.config.expiryToleranceMs ?? 0), k.expiresAtMs - expiry);
          const age = Math.min(now - k.liveSinceTrueMs, 4 * (k.ttlMs ?? 0) + 4);
          const attemptsAgo = (world.clients[k.owner.client]?.attempts ?? 0) - k.owner.attempt;
          return `${r}=${k.owner.client}/${attemptsAgo}/${remaining}/${k.ttlMs}/${k.count}/${age}`;
        });
    const countersOf = (counters: NodeState['counters']): string =>
      Object.entries(counters).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => `${k}:${v}`).join(',');
    const keys = keysOf(n.keys);
    const cut = world.partitions.filter((l) => l.endsWith(`:${index}`)).map((l) => l.split(':')[0]);
    return [
      n.up ? 'up' : 'down',
      Math.max(0, n.availableFromTrueMs - now),
      read(n.wall, now) - now,
      n.wall.driftPpm,
      read(n.mono, now) - now,
      n.mono.driftPpm,
      keys.join(','),
      countersOf(n.counters),
      cut.join(','),
      n.replica === undefined ? '' : `replica:${keysOf(n.replica.keys).join(',')}/${countersOf(n.replica.counters)}`,
      n.delay ?? '',
    ].join('|');
  });
  const rest = options.nodeSymmetry === false ? nodes.slice(1) : nodes.slice(1).sort();
  const clients = world.clients.map((c) => {
    const mono = read(c.mono, now);
    const leases = Object.entries(c.leases)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([r, l]) => {
        const left = l.validUntilMs === null ? 'session' : Math.max(-1, l.validUntilMs - mono);
        return `${r}=${c.attempts - l.owner.attempt}/${l.token}/${left}/${l.count}/${l.buffered.join('+')}/${l.epoch}`;
      });
    const p = c.pendingWrite;
    const reply = c.inFlight === null ? '' : inFlightKey(c.inFlight, now, mono);
    return [mono - now, c.mono.driftPpm, c.paused ? 'P' : '', p ? `${p.resource}:${p.value}:${p.token}:${p.epoch}` : '', reply, c.sessionLost ? 'L' : '', leases.join(',')].join('|');
  });
  const store = Object.entries(world.store.cells)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([r, c]) => `${r}=${c.value}/${c.token}/${c.highest}`);
  const ghost = Object.entries(world.ghost)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([r, g]) => `${r}=${g.grants}/${g.maxToken}/${g.lastAcceptedEpoch}`);
  return `${nodes[0]};${rest.join(';')}#${clients.join(';')}#${store.join(',')}#${ghost.join(',')}`;
}
