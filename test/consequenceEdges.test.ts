import { describe, expect, it } from 'vitest';
import { consequenceOf } from '../conformance/consequence.ts';
import type { Command } from '../model/index.ts';

/**
 * A deviation's consequence at the edges of its rules (docs/mutation.md,
 * "session h17"): the classification decides what a library audit goes
 * past, so an unsafe deviation read as safe is a missed finding.
 */
const acquire: Command = { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 };
const extend: Command = { kind: 'extend', client: 0, resource: 'r', ttlMs: 10 };
const release: Command = { kind: 'release', client: 0, resource: 'r' };

describe('consequenceOf', () => {
  it('a refusal is "the same refusal, for another reason" only where the model refuses in every allowed outcome', () => {
    // The model may grant: a denial is the lock not there (liveness), not the safe direction.
    expect(consequenceOf('LIVE-1', acquire, { kind: 'denied', reason: 'held' }, [{ kind: 'granted', token: 1n, validUntilMs: 8 }, { kind: 'denied', reason: 'no-quorum' }], 'deviation')).toEqual({ kind: 'liveness', what: 'the lock was not there when the model has it' });
    expect(consequenceOf('LIVE-1', acquire, { kind: 'denied', reason: 'held' }, [{ kind: 'denied', reason: 'no-quorum' }], 'deviation')).toEqual({ kind: 'safe', what: 'the same refusal, for another reason' });
  });

  it('a refusal whose deviation is a key (OWN-1) stays unsafe, though the model refuses too', () => {
    const message = "node 0 should hold client 0's key on 'r' (owner 1234abcd…) but holds nothing; then the backend answered …";
    expect(consequenceOf('OWN-1', extend, { kind: 'not-extended', reason: 'expired' }, [{ kind: 'not-extended', reason: 'no-quorum' }], message)).toEqual({ kind: 'unsafe', what: 'a key of another owner changed' });
  });

  it('a released key a node still holds is liveness (it stays until its ttl), any other key of another owner unsafe', () => {
    expect(consequenceOf('OWN-1', release, { kind: 'released' }, [{ kind: 'released' }], "node 0 still holds client 0's released key on 'r' (owner 1234abcd…)")).toEqual({ kind: 'liveness', what: 'a released key stays until its ttl' });
    expect(consequenceOf('OWN-1', release, { kind: 'released' }, [{ kind: 'released' }], 'the backend holds keys no model state allows')).toEqual({ kind: 'unsafe', what: 'a key of another owner changed' });
  });

  it('an extension with less validity than allowed is the safe direction, as a grant with less is', () => {
    expect(consequenceOf('LIVE-1', extend, { kind: 'extended', validUntilMs: 5 }, [{ kind: 'extended', validUntilMs: 6 }], 'deviation')).toEqual({ kind: 'safe', what: 'validity shorter than allowed' });
  });

  it('an extension claimed where the model extends too, but the keys differ, is a key changed, not a lease that is over', () => {
    expect(consequenceOf('OWN-1', extend, { kind: 'extended', validUntilMs: 12 }, [{ kind: 'extended', validUntilMs: 10 }], 'the backend answered …')).toEqual({ kind: 'unsafe', what: 'a key of another owner changed' });
  });
});
