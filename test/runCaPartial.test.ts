/**
 * makeRunCa signs its two leaves with two openssl processes at once: when one
 * fails, the start that made the CA removes the directory and goes on, so the
 * other must have ended first (not left signing into a removed directory,
 * out of reach of stop() and of the tests' process checks).
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { EnvironmentError } from '../conformance/env/faketime.ts';
import { makeRunCa } from '../conformance/env/runCa.ts';
import { descendantsNamed } from './probes.ts';

const made: string[] = [];
const path = process.env['PATH'];

afterEach(() => {
  process.env['PATH'] = path;
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('makeRunCa: one leaf that fails', () => {
  it('rejects EnvironmentError only once the other leaf\'s openssl has ended', async () => {
    const real = '/usr/bin/openssl';
    const bin = mkdtempSync(join(tmpdir(), 'lockcheck-fakeopenssl-'));
    const dir = mkdtempSync(join(tmpdir(), 'lockcheck-runca-'));
    made.push(bin, dir);
    // The CA is signed by the real openssl; the client leaf fails at once; the server leaf takes 2 s, then signs.
    writeFileSync(
      join(bin, 'openssl'),
      ['#!/bin/sh', 'case "$*" in', `  *"run CA"*) exec ${real} "$@" ;;`, '  *"lockcheck client"*) echo "no client leaf today" >&2; exit 1 ;;', `  *) sleep 2; exec ${real} "$@" ;;`, 'esac', ''].join('\n'),
    );
    chmodSync(join(bin, 'openssl'), 0o755);
    process.env['PATH'] = `${bin}:${path ?? '/usr/bin:/bin'}`;
    const error: unknown = await makeRunCa(dir).then(
      () => null,
      (e: unknown) => e,
    );
    expect(descendantsNamed('openssl'), 'openssl still running after the rejection').toEqual([]);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect(String((error as Error).message)).toMatch(/no client leaf today/);
  }, 30_000);
});
