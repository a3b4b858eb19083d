import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { chromium } from 'playwright-core';

/**
 * Debian's Chromium, headless through playwright-core (which never downloads
 * a browser of its own), for the tests that check rendered reports.
 * Screenshots go to .ci/out/artifacts/.
 */
export const CHROMIUM = '/usr/bin/chromium';
export const ARTIFACTS = fileURLToPath(new URL('../.ci/out/artifacts/', import.meta.url));
export const WAIT_MS = 15_000;
// Without the background-networking flags Chromium keeps dialling out, and this machine's network refuses it.
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Without the browser a test fails (not skips) with what to do about it. */
export function requireChromium(): void {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/setup.sh (as root) to install Debian's chromium package`);
}

/**
 * A browser on a new, empty profile in a temp dir (pushed onto `dirs` for the
 * caller to remove): launchPersistentContext takes it (Playwright refuses
 * --user-data-dir in args), and XDG dirs beside it keep Chromium's crash
 * database and cache out of $HOME.
 */
export async function launchChromium(dirs: string[]): Promise<{ context: BrowserContext; page: Page }> {
  const home = mkdtempSync(join(tmpdir(), 'lockcheck-chromium-'));
  dirs.push(home);
  const profile = join(home, 'profile');
  mkdirSync(profile);
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    env: { ...process.env, XDG_CONFIG_HOME: join(home, 'config'), XDG_CACHE_HOME: join(home, 'cache') },
    timeout: 60_000,
    viewport: { width: 1280, height: 800 },
  });
  context.setDefaultTimeout(WAIT_MS);
  context.setDefaultNavigationTimeout(WAIT_MS);
  mkdirSync(ARTIFACTS, { recursive: true });
  return { context, page: context.pages()[0] ?? (await context.newPage()) };
}

/** Closes the browser, when one was launched, and removes every dir in `dirs` (the profile's and the test's own), even when the close fails. */
export async function closeChromium(context: BrowserContext | undefined, dirs: readonly string[]): Promise<void> {
  try {
    await context?.close();
  } finally {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}
