import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * scripts/setup.sh on a machine whose node is too old or missing: it stops at once with one line saying so,
 * before npm ci or apt-get (an old node failed later, inside a dependency, with a message that did not say why).
 */
const script = fileURLToPath(new URL('../scripts/setup.sh', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'lockcheck-setup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** setup.sh with PATH = a directory holding only dirname (the script's first command) and the given `node` script, if any. */
function setup(name: string, node: string | null): { code: number | null; err: string } {
  const bin = join(dir, name);
  mkdirSync(bin);
  symlinkSync('/usr/bin/dirname', join(bin, 'dirname'));
  if (node !== null) {
    writeFileSync(join(bin, 'node'), node);
    chmodSync(join(bin, 'node'), 0o755);
  }
  const r = spawnSync('/bin/sh', [script], { env: { PATH: bin, HOME: dir }, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, err: r.stderr };
}

describe('scripts/setup.sh', () => {
  it('refuses a node older than 20, naming its version', () => {
    // A node that is version 18: `node -p process.versions.node` prints 18.19.0.
    const r = setup('old', '#!/bin/sh\necho 18.19.0\n');
    expect(r.code, r.err).toBe(1);
    expect(r.err.trim()).toBe('lockcheck setup: lockcheck needs Node 20 or newer; this node is 18.19.0');
  });

  it('says when there is no node at all', () => {
    const r = setup('none', null);
    expect(r.code, r.err).toBe(1);
    expect(r.err.trim()).toBe('lockcheck setup: node is not on the PATH; lockcheck needs Node 20 or newer (https://nodejs.org)');
  });
});
