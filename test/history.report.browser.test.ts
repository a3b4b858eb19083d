import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, CHROMIUM, closeChromium, launchChromium, requireChromium, WAIT_MS } from './chromium.ts';
import { checkHistory } from '../conformance/history/check.ts';
import { HistoryFormatError, parseHistory } from '../conformance/history/parse.ts';
import { writeHistoryReport } from '../conformance/history/report.ts';

/**
 * The history timeline as a reader sees it: writeHistoryReport (what
 * `lockcheck check --report` and the stress runner write) for a history with
 * an overlap and a fault, rendered by Debian's Chromium headless through
 * playwright-core; the assertions are on the rendered page. A screenshot is
 * kept in .ci/out/artifacts/.
 */

const dirs: string[] = [];
let context: BrowserContext | undefined;
let page: Page;
let out: string;

function report(fixture: string, dir: string): string {
  const history = parseHistory(readFileSync(join('test/fixtures/histories', fixture), 'utf8'));
  if (history instanceof HistoryFormatError) throw history;
  return writeHistoryReport(join(out, dir), history, checkHistory(history), fixture);
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) return;
  out = mkdtempSync(join(tmpdir(), 'lockcheck-history-report-'));
  dirs.push(out);
  ({ context, page } = await launchChromium(dirs));
}, 120_000);

afterAll(() => closeChromium(context, dirs), 60_000);

describe('the history timeline, rendered in Chromium', () => {
  it('shows one lane per process, the overlapping pair in red, the fault as a band, the finding', async () => {
    requireChromium();
    await page.goto(pathToFileURL(report('overlap.jsonl', 'overlap')).href);
    const svg = page.locator('svg#timeline');
    await svg.waitFor({ state: 'visible' });
    const lanes = await svg.locator('g.lane').evaluateAll((gs) => gs.map((g) => g.getAttribute('data-process')));
    expect(lanes).toEqual(['0', '1', '2']);
    const violating = svg.locator('rect.hold.violating');
    expect(await violating.count()).toBe(2);
    expect(await violating.evaluateAll((rs) => rs.map((r) => [r.getAttribute('data-process'), r.getAttribute('data-start')]))).toEqual([
      ['0', '4'],
      ['1', '42'],
    ]);
    for (const r of await violating.all()) {
      const box = await r.boundingBox();
      expect(box?.width ?? 0).toBeGreaterThan(10);
      expect(await r.evaluate((el) => (globalThis as unknown as { getComputedStyle(e: unknown): { fill: string } }).getComputedStyle(el).fill)).toBe('rgb(221, 51, 51)');
    }
    const band = svg.locator('g.fault-band[data-fault="pause-server"] rect');
    expect(await band.count()).toBe(1);
    expect((await band.boundingBox())?.height ?? 0).toBeGreaterThan(60);
    expect(await page.locator('#verdict').innerText()).toMatch(/violation/);
    expect(await page.locator('#findings tbody tr').first().innerText()).toMatch(/MUTEX-1\s+two clients believed they held 'r' at once/);
    await page.screenshot({ path: join(ARTIFACTS, 'history-report-overlap.png'), fullPage: true, timeout: WAIT_MS });
  });

  it('a safe history has its holds drawn and none in red', async () => {
    requireChromium();
    await page.goto(pathToFileURL(report('safe.jsonl', 'safe')).href);
    const svg = page.locator('svg#timeline');
    await svg.waitFor({ state: 'visible' });
    expect(await svg.locator('rect.hold').count()).toBe(2);
    expect(await svg.locator('rect.hold.violating').count()).toBe(0);
    expect(await page.locator('#verdict').innerText()).toMatch(/safe/);
  });
});
