import { describe, expect, it } from 'vitest';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { checkConformance } from '../conformance/check.ts';
import { textTimeline } from '../conformance/timeline.ts';
import type { RunReport } from '../conformance/verdict.ts';
import { designs } from '../model/design.ts';
import { LeaseLock } from '../impl/leaseLock.ts';

/** Claims 1 ms less validity than it has: a conformance failure with leases on the timeline. */
class ShortValidity extends LeaseLock {
  protected override driftMarginMs(ttlMs: number): number {
    return super.driftMarginMs(ttlMs) + 1;
  }
}

/**
 * A text timeline goes to a terminal and into matrix/*.txt: a backend's
 * name, a lease's resource and a message are text of the adapter's, so a
 * control character, a line separator or a bidirectional override in them
 * is shown as an escape, never written raw (an escape sequence that clears
 * the screen, a newline that forges a step line).
 */
describe('textTimeline shows user text with its control characters escaped', () => {
  it('in the headline (backend name, message) and in the leases line (resource)', async () => {
    const backend = simLeaseBackend(designs.redisSingle(), 'strict', { lock: (p) => new ShortValidity(p) }, 'short validity');
    const found = await checkConformance(backend, { runs: 30, seed: 3, faults: ['advance', 'pause'] });
    const report = found.failure?.report;
    expect(report?.verdict.kind, found.failure?.message).toBe('conformance-failure');
    if (report === undefined || report.verdict.kind !== 'conformance-failure') return;
    const evil = 'x\u001b[2J\n  9. forged step\u202e';
    const steps = report.steps.map((s) => ({ ...s, leases: [{ client: 0, resource: evil, token: 1n, validUntilTrueMs: 10 }] }));
    const crafted: RunReport = { ...report, backend: evil, steps, verdict: { ...report.verdict, message: evil } };
    const text = textTimeline(crafted);
    // oxlint-disable-next-line no-control-regex -- the control characters are what it looks for
    expect(text).not.toMatch(/[\u001b\u202e]/);
    expect(text).not.toMatch(/^\s*9\. forged step/m);
    expect(text).toContain('x\\u001b[2J\\n  9. forged step\\u202e');
  });
});
