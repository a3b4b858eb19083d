import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { testTempDir } from './tempDirs.ts';

/**
 * scripts/setup.sh on a machine whose node is too old or missing: it stops at once with one line saying so,
 * before npm ci or apt-get (an old node failed later, inside a dependency, with a message that did not say why).
 * And where apt cannot provide what lockcheck needs, it fails with a last line of its own naming what is missing.
 */
const script = fileURLToPath(new URL('../scripts/setup.sh', import.meta.url));
const dir = testTempDir('lockcheck-setup-');

/**
 * setup.sh with PATH = a directory holding only dirname and uname (POSIX tools it uses) and the given scripts (`node`,
 * and `npm`, `id`, `apt-get` stand-ins: nothing is installed for real), so every command-line tool it checks is absent.
 */
function setup(name: string, node: string | null, fakes: Record<string, string> = {}): { code: number | null; err: string } {
  const bin = join(dir, name);
  mkdirSync(bin);
  for (const tool of ['dirname', 'uname']) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
  for (const [command, text] of Object.entries({ ...(node === null ? {} : { node }), ...fakes })) {
    writeFileSync(join(bin, command), text);
    chmodSync(join(bin, command), 0o755);
  }
  const r = spawnSync('/bin/sh', [script], { env: { PATH: bin, HOME: dir }, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, err: r.stderr };
}

describe('scripts/setup.sh', () => {
  // `node -p process.versions.node` prints the version: below package.json's engines (^20.19.0 || >=22.12.0) each is refused.
  for (const version of ['18.19.0', '20.0.0', '20.18.3', '21.7.3', '22.11.0']) {
    it(`refuses node ${version}, naming its version`, () => {
      const r = setup(`old-${version}`, `#!/bin/sh\necho ${version}\n`);
      expect(r.code, r.err).toBe(1);
      expect(r.err.trim()).toBe(`lockcheck setup: lockcheck needs Node 20.19 or newer (22.12 or newer past 20); this node is ${version}`);
    });
  }

  it('takes the engines package.json names', () => {
    expect((JSON.parse(readFileSync(fileURLToPath(new URL('../package.json', import.meta.url)), 'utf8')) as { engines: { node: string } }).engines.node).toBe('^20.19.0 || >=22.12.0');
  });

  // As root on a machine whose apt cannot give what lockcheck looks for: `npm ci` a no-op, `id -u` 0.
  const root = { node: '#!/bin/sh\necho 20.19.0\n', npm: '#!/bin/sh\nexit 0\n', id: '#!/bin/sh\necho 0\n' };

  it('fails naming what is still missing when apt-get installs without error but the files are not where lockcheck looks', () => {
    // Another distribution: its packages install (exit 0) and put nothing at Debian 12's paths (here: no redis-server on PATH).
    const r = setup('elsewhere', null, { ...root, 'apt-get': '#!/bin/sh\nexit 0\n' });
    expect(r.code, r.err).toBe(1);
    expect(r.err.trim().split('\n').at(-1)).toMatch(/^lockcheck setup: apt-get installed, but still missing: redis-server redis-sentinel .*\(lockcheck looks for Debian 12's files: docs\/getting-started\.md#install\)$/);
  });

  it('ends with a line of its own, naming the packages, when apt-get fails', () => {
    const r = setup('no-apt', null, { ...root, 'apt-get': '#!/bin/sh\necho "E: Unable to locate package etcd-server" >&2\nexit 100\n' });
    expect(r.code, r.err).toBe(1);
    expect(r.err.trim().split('\n').at(-1)).toMatch(/^lockcheck setup: apt-get update failed \(above\); not installed: redis-server redis-sentinel /);
  });

  it('says when there is no node at all', () => {
    const r = setup('none', null);
    expect(r.code, r.err).toBe(1);
    expect(r.err.trim()).toBe('lockcheck setup: node is not on the PATH; lockcheck needs Node 20.19 or newer (22.12 or newer past 20) (https://nodejs.org)');
  });
});
