import { match } from 'ts-pattern';
import { checkCommandShape, isObject, refuse } from './checks.ts';
import type { Command } from './command.ts';
import type { Outcome } from './outcome.ts';

function late(latencyMs: number | undefined): string {
  return latencyMs ? ` (reply after ${latencyMs}ms)` : '';
}

/** Commands and outcomes in the domain's words, for traces people read. */
export function describeCommand(c: Command): string {
  checkCommandShape(c, 'describeCommand command');
  // What the text interpolates: a Symbol has no string form, and a clock-drift's target is looked into.
  for (const [field, v] of Object.entries(c)) if (typeof v === 'symbol') refuse(`describeCommand command.${field}`, 'a number, a string or an object', v);
  if (c.kind === 'clock-drift' && !isObject(c.target)) refuse('describeCommand command.target', 'an object { node } or { client }', c.target);
  return match(c)
    .with(
      { kind: 'acquire' },
      (a) =>
        `client ${a.client} acquire '${a.resource}'${a.ttlMs !== undefined ? ` ttl ${a.ttlMs}ms` : ''}${a.latencyMs ? ` (reply after ${a.latencyMs}ms)` : ''}${a.retries ? `, ${a.retries} retries ${a.retryDelayMs ?? 0}ms apart` : ''}`,
    )
    .with({ kind: 'extend' }, (e) => `client ${e.client} extend '${e.resource}' ttl ${e.ttlMs}ms${late(e.latencyMs)}`)
    .with({ kind: 'release' }, (r) => `client ${r.client} release '${r.resource}'${late(r.latencyMs)}`)
    .with({ kind: 'write' }, (w) => `client ${w.client} write '${w.resource}' := ${JSON.stringify(w.value)}${late(w.latencyMs)}${w.delayed ? ' (the network delays the request)' : ''}`)
    .with({ kind: 'read' }, (r) => `client ${r.client} read '${r.resource}'`)
    .with({ kind: 'advance' }, (a) => `time passes ${a.ms}ms`)
    .with({ kind: 'clock-step' }, (s) => `node ${s.node} wall clock jumps ${s.deltaMs >= 0 ? '+' : ''}${s.deltaMs}ms`)
    .with({ kind: 'clock-drift' }, (d) => `${'node' in d.target ? `node ${d.target.node}` : `client ${d.target.client}`} clock drifts ${d.driftPpm / 10_000}%`)
    .with({ kind: 'pause' }, (p) =>
      p.inFlight
        ? `client ${p.client} sends "${describeCommand(p.inFlight)}" and pauses before reading the replies`
        : `client ${p.client} pauses${p.pendingWrite ? ` after checking its lease, before writing '${p.pendingWrite.resource}' := ${JSON.stringify(p.pendingWrite.value)}` : ''}`,
    )
    .with({ kind: 'resume' }, (r) => `client ${r.client} resumes`)
    .with({ kind: 'deliver' }, (d) => `client ${d.client}'s delayed write reaches the store`)
    .with({ kind: 'replicate' }, (r) => `node ${r.node}'s replica receives everything so far`)
    .with({ kind: 'crash' }, (c) => `node ${c.node} crashes`)
    .with({ kind: 'restart' }, (r) => `node ${r.node} restarts`)
    .with({ kind: 'partition' }, (p) => `link client ${p.client} <-> node ${p.node} cut`)
    .with({ kind: 'heal' }, (h) => `link client ${h.client} <-> node ${h.node} healed`)
    .with({ kind: 'node-delay' }, (d) => (d.ms === 'never' ? `node ${d.node} becomes a black hole (requests vanish, no reply)` : d.ms === 0 ? `node ${d.node} answers at once again` : `node ${d.node}'s replies take ${d.ms}ms longer`))
    .with({ kind: 'kill-connection' }, (k) => `server kills client ${k.client}'s connection`)
    .otherwise(() => refuse('describeCommand command', 'a command of a known kind', (c as { kind: unknown }).kind, 'precondition'));
}

/** An outcome in words, as timelines print it. Throws InvalidInputError for what is not an outcome. */
export function describeOutcome(o: Outcome): string {
  if (!isObject(o) || typeof o.kind !== 'string') refuse('describeOutcome outcome', 'an outcome (an object with a kind)', o);
  return match(o)
    .with({ kind: 'granted' }, (g) => `granted, token ${g.token}${g.validUntilMs !== null ? `, valid until ${g.validUntilMs}ms on its clock` : ''}`)
    .with({ kind: 'denied' }, (d) => `denied (${d.reason})`)
    .with({ kind: 'extended' }, (e) => `extended, valid until ${e.validUntilMs}ms on its clock`)
    .with({ kind: 'not-extended' }, (n) => `not extended (${n.reason})`)
    .with({ kind: 'released' }, () => 'released')
    .with({ kind: 'not-held' }, () => 'not held')
    .with({ kind: 'accepted' }, () => 'write accepted')
    .with({ kind: 'rejected' }, (r) => `write rejected (highest token ${r.highest})`)
    .with({ kind: 'value' }, (v) => `read ${v.value === null ? 'nothing' : JSON.stringify(v.value)}${v.token !== null ? ` (token ${v.token})` : ''}`)
    .with({ kind: 'ok' }, () => 'ok')
    .with({ kind: 'timed-out' }, () => 'timed out (may or may not have taken effect)')
    .otherwise(() => refuse('describeOutcome outcome', 'an outcome of a known kind', (o as { kind: unknown }).kind));
}
