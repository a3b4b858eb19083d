import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, CHROMIUM, closeChromium, launchChromium, requireChromium, WAIT_MS } from './chromium.ts';

/**
 * The HTML report as a reader sees it: `lockcheck matrix` writes a small
 * report (two backends x two fault classes, on redis servers it starts
 * itself), Debian's Chromium renders it headless through playwright-core
 * (which never downloads a browser of its own), and the assertions are on the
 * rendered page. Full-page screenshots of the report and of one timeline are
 * kept in .ci/out/artifacts/.
 */

const dirs: string[] = [];
let context: BrowserContext | undefined;
let page: Page;
let out: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) return;
  out = mkdtempSync(join(tmpdir(), 'lockcheck-report-'));
  dirs.push(out);
  const r = spawnSync(
    process.execPath,
    ['cli/lockcheck.mjs', 'matrix', '--backend', 'redis-single/unfenced,redis-single/strict', '--faults', 'clock-step,client-pause', '--runs', '12', '--out', out],
    { encoding: 'utf8', timeout: 240_000 },
  );
  if (r.status !== 0) throw new Error(`lockcheck matrix exited with ${r.status ?? r.signal}:\n${r.stderr}`);
  ({ context, page } = await launchChromium(dirs));
}, 300_000);

afterAll(() => closeChromium(context, dirs), 60_000);

describe('the HTML matrix report, rendered in Chromium', () => {
  it('shows the matrix: two rows, the fault-class columns, clock-step cells that link to MUTEX-1 counterexamples', async () => {
    requireChromium();
    await page.goto(pathToFileURL(join(out, 'matrix', 'index.html')).href);
    const table = page.locator('table#matrix');
    await table.waitFor({ state: 'visible' });
    expect(await table.locator('tbody > tr').count()).toBe(2);
    const headers = (await table.locator('thead th').allInnerTexts()).map((t) => t.trim());
    expect(headers).toEqual(expect.arrayContaining(['clock-step', 'client-pause']));
    for (const backend of ['redis-single/unfenced', 'redis-single/strict']) {
      const cell = table.locator(`td[data-backend="${backend}"][data-fault="clock-step"]`);
      expect(await cell.innerText(), backend).toContain('MUTEX-1');
      const link = cell.locator('a');
      await expect.poll(() => link.count(), { timeout: WAIT_MS }).toBe(1);
      expect(await link.isVisible()).toBe(true);
      expect(await link.getAttribute('href')).toMatch(/\.html$/);
    }
    await page.screenshot({ path: join(ARTIFACTS, 'matrix-report.png'), fullPage: true, timeout: WAIT_MS });
  });

  it('follows the redis-single/unfenced x clock-step link to a timeline with an SVG and the violation', async () => {
    requireChromium();
    await page.goto(pathToFileURL(join(out, 'matrix', 'index.html')).href);
    await page.locator('td[data-backend="redis-single/unfenced"][data-fault="clock-step"] a').click();
    await page.waitForURL(/redis-single_unfenced__clock-step\.html$/);
    const svg = page.locator('svg').first();
    await svg.waitFor({ state: 'visible' });
    const box = await svg.boundingBox();
    expect(box?.width ?? 0).toBeGreaterThan(0);
    expect(box?.height ?? 0).toBeGreaterThan(0);
    expect(await svg.locator('circle').count()).toBeGreaterThanOrEqual(1);
    expect(await page.locator('body').innerText()).toContain('PROPERTY VIOLATION');
    await page.screenshot({ path: join(ARTIFACTS, 'matrix-timeline-redis-single_unfenced__clock-step.png'), fullPage: true, timeout: WAIT_MS });
  });
});
