/**
 * An interrupted stress run saves what it recorded beside, never over, the
 * complete history an earlier run left in its --out directory, and saves
 * nothing when it recorded nothing (an interrupt replaced a complete history
 * with an empty one and removed its report: found by an audit). The CLI run
 * with events recorded is in stress.test.ts.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PARTIAL_HISTORY, saveInterruptedHistory } from '../cli/stress.ts';
import type { HistoryEvent } from '../conformance/history/event.ts';
import { testTempDir } from './tempDirs.ts';

const dir = testTempDir('lockcheck-interrupted-stress-');
const earlier = { 'history.jsonl': '{"type":"meta","store":"unfenced"}\n', 'history.html': '<p>the earlier run</p>\n' };

function outWithEarlierRun(name: string): string {
  const out = join(dir, name);
  mkdirSync(out);
  for (const [file, text] of Object.entries(earlier)) writeFileSync(join(out, file), text);
  return out;
}

const filesIn = (out: string): Record<string, string> => Object.fromEntries(readdirSync(out).sort().map((f) => [f, readFileSync(join(out, f), 'utf8')]));

describe('an interrupted stress run\'s history', () => {
  it('with no event recorded: nothing is written, the earlier run\'s files stay as they were', () => {
    const out = outWithEarlierRun('none');
    let wrote = false;
    expect(saveInterruptedHistory(out, [], () => (wrote = true))).toBeNull();
    expect(wrote).toBe(false);
    expect(filesIn(out)).toEqual(earlier);
  });

  it('with events: written to history.partial.jsonl, the earlier run\'s history.jsonl and history.html untouched', () => {
    const out = outWithEarlierRun('some');
    const event = { type: 'invoke' } as unknown as HistoryEvent;
    const file = saveInterruptedHistory(out, [event], (path) => writeFileSync(path, 'partial\n'));
    expect(file).toBe(join(out, PARTIAL_HISTORY));
    expect(filesIn(out)).toEqual({ ...earlier, [PARTIAL_HISTORY]: 'partial\n' });
  });

  it('into an --out directory that does not exist yet: made for it', () => {
    const out = join(dir, 'new', 'out');
    const file = saveInterruptedHistory(out, [{ type: 'invoke' } as unknown as HistoryEvent], (path) => writeFileSync(path, 'partial\n'));
    expect(file !== null && existsSync(file)).toBe(true);
  });
});
