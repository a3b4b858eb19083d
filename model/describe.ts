import { match } from 'ts-pattern';
import { checkCommandShape, isObject, refuse } from './checks.ts';
import type { Command } from './command.ts';
import type { Outcome } from './outcome.ts';
import { quotedName, quotedValue, shownField } from './shownText.ts';

function late(latencyMs: number | undefined): string {
  return latencyMs ? ` (reply after ${f(latencyMs)}ms)` : '';
}

/** A field as text: numbers as they are, strings (names, or junk where a number goes) quoted with their control characters escaped (shownText.ts). */
const f = shownField;
const name = (v: unknown): string => (typeof v === 'string' ? quotedName(v) : f(v));
const value = (v: unknown): string => (typeof v === 'string' ? quotedValue(v) : f(v));

/** Commands and outcomes in the domain's words, for traces people read. A name's control characters are shown escaped, never printed raw. */
export function describeCommand(c: Command): string {
  checkCommandShape(c, 'describeCommand command');
  // What the text interpolates: a Symbol has no string form, and a clock-drift's target is looked into.
  for (const [field, v] of Object.entries(c)) if (typeof v === 'symbol') refuse(`describeCommand command.${field}`, 'a number, a string or an object', v);
  if (c.kind === 'clock-drift' && !isObject(c.target)) refuse('describeCommand command.target', 'an object { node } or { client }', c.target);
  return match(c)
    .with(
      { kind: 'acquire' },
      (a) =>
        `client ${f(a.client)} acquire ${name(a.resource)}${a.ttlMs !== undefined ? ` ttl ${f(a.ttlMs)}ms` : ''}${late(a.latencyMs)}${a.retries ? `, ${f(a.retries)} retries ${f(a.retryDelayMs ?? 0)}ms apart` : ''}`,
    )
    .with({ kind: 'extend' }, (e) => `client ${f(e.client)} extend ${name(e.resource)} ttl ${f(e.ttlMs)}ms${late(e.latencyMs)}`)
    .with({ kind: 'release' }, (r) => `client ${f(r.client)} release ${name(r.resource)}${late(r.latencyMs)}`)
    .with({ kind: 'write' }, (w) => `client ${f(w.client)} write ${name(w.resource)} := ${value(w.value)}${late(w.latencyMs)}${w.delayed ? ' (the network delays the request)' : ''}`)
    .with({ kind: 'read' }, (r) => `client ${f(r.client)} read ${name(r.resource)}`)
    .with({ kind: 'advance' }, (a) => `time passes ${f(a.ms)}ms`)
    .with({ kind: 'clock-step' }, (s) => `node ${f(s.node)} wall clock jumps ${s.deltaMs >= 0 ? '+' : ''}${f(s.deltaMs)}ms`)
    .with({ kind: 'clock-drift' }, (d) => `${'node' in d.target ? `node ${f(d.target.node)}` : `client ${f(d.target.client)}`} clock drifts ${d.driftPpm / 10_000}%`)
    .with({ kind: 'pause' }, (p) =>
      p.inFlight
        ? `client ${f(p.client)} sends "${describeCommand(p.inFlight)}" and pauses before reading the replies`
        : `client ${f(p.client)} pauses${p.pendingWrite ? ` after checking its lease, before writing ${name(p.pendingWrite.resource)} := ${value(p.pendingWrite.value)}` : ''}`,
    )
    .with({ kind: 'resume' }, (r) => `client ${f(r.client)} resumes`)
    .with({ kind: 'deliver' }, (d) => `client ${f(d.client)}'s delayed write reaches the store`)
    .with({ kind: 'replicate' }, (r) => `node ${f(r.node)}'s replica receives everything so far`)
    .with({ kind: 'crash' }, (c) => `node ${f(c.node)} crashes`)
    .with({ kind: 'restart' }, (r) => `node ${f(r.node)} restarts`)
    .with({ kind: 'partition' }, (p) => `link client ${f(p.client)} <-> node ${f(p.node)} cut`)
    .with({ kind: 'heal' }, (h) => `link client ${f(h.client)} <-> node ${f(h.node)} healed`)
    .with({ kind: 'node-delay' }, (d) => (d.ms === 'never' ? `node ${f(d.node)} becomes a black hole (requests vanish, no reply)` : d.ms === 0 ? `node ${f(d.node)} answers at once again` : `node ${f(d.node)}'s replies take ${f(d.ms)}ms longer`))
    .with({ kind: 'kill-connection' }, (k) => `server kills client ${f(k.client)}'s connection`)
    .otherwise(() => refuse('describeCommand command', 'a command of a known kind', (c as { kind: unknown }).kind, 'precondition'));
}

/** An outcome in words, as timelines print it. Throws InvalidInputError for what is not an outcome. */
export function describeOutcome(o: Outcome): string {
  if (!isObject(o) || typeof o.kind !== 'string') refuse('describeOutcome outcome', 'an outcome (an object with a kind)', o);
  return match(o)
    .with({ kind: 'granted' }, (g) => `granted, token ${f(g.token)}${g.validUntilMs !== null ? `, valid until ${f(g.validUntilMs)}ms on its clock` : ''}`)
    .with({ kind: 'denied' }, (d) => `denied (${typeof d.reason === 'string' && /^[a-z-]+$/.test(d.reason) ? d.reason : f(d.reason)})`)
    .with({ kind: 'extended' }, (e) => `extended, valid until ${f(e.validUntilMs)}ms on its clock`)
    .with({ kind: 'not-extended' }, (n) => `not extended (${typeof n.reason === 'string' && /^[a-z-]+$/.test(n.reason) ? n.reason : f(n.reason)})`)
    .with({ kind: 'released' }, () => 'released')
    .with({ kind: 'not-held' }, () => 'not held')
    .with({ kind: 'accepted' }, () => 'write accepted')
    .with({ kind: 'rejected' }, (r) => `write rejected (highest token ${f(r.highest)})`)
    .with({ kind: 'value' }, (v) => `read ${v.value === null ? 'nothing' : value(v.value)}${v.token !== null ? ` (token ${f(v.token)})` : ''}`)
    .with({ kind: 'ok' }, () => 'ok')
    .with({ kind: 'timed-out' }, () => 'timed out (may or may not have taken effect)')
    .otherwise(() => refuse('describeOutcome outcome', 'an outcome of a known kind', (o as { kind: unknown }).kind));
}
