import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { designs } from '../model/design.ts';
import { alphabetFor, FAULT_CLASS_ALLOWS, FAULT_CLASSES } from '../model/faultClass.ts';
import { derivedProperties, MATRIX_ROWS } from '../model/matrix.ts';
import { liveBoundMs, PROPERTY_IDS, PROPERTY_TITLES } from '../model/properties.ts';
import type { Predicted } from '../spec/tables.ts';
import { blockIn, blocks, faultKindsOf, VERDICTS_FILE } from '../spec/tables.ts';
import { anchors, relativeLinks } from './markdownLinks.ts';

/**
 * The spec, the guide and the docs say what the model says: generated tables
 * are up to date, the saved exploration is the model's, and the statements
 * that are easy to get wrong by hand are checked against the code.
 * Regenerate with `npm run spec:tables` (`-- --explore` after a model change).
 */
const read = (path: string): string => readFileSync(path, 'utf8');
const SPEC = read('spec/SPEC.md');
const GUIDE = read('docs/choosing-a-lock.md');
const MATRIX_MD = read('docs/matrix.md');
const PREDICTED = JSON.parse(read(VERDICTS_FILE)) as Predicted;
const REGENERATE = 'stale: run `npm run spec:tables` (with `-- --explore` after a model change)';

describe('generated tables are up to date', () => {
  for (const [file, text] of [['spec/SPEC.md', SPEC], ['docs/choosing-a-lock.md', GUIDE]] as const) {
    it(`${file}: every generated block equals what the model renders`, () => {
      const expected = blocks(PREDICTED, MATRIX_MD);
      const present = Object.keys(expected).filter((name) => blockIn(text, name) !== null);
      expect(present.length, `${file} carries no generated block`).toBeGreaterThan(0);
      for (const name of present) expect(blockIn(text, name), `${file} block '${name}' ${REGENERATE}`).toBe(expected[name]);
    });
  }

  it('the spec carries the predicted matrix, the fault classes and the properties; the guide the measured-vs-predicted table', () => {
    for (const name of ['predicted-matrix', 'fault-classes', 'properties']) expect(blockIn(SPEC, name), name).not.toBeNull();
    expect(blockIn(GUIDE, 'measured-vs-predicted')).not.toBeNull();
  });
});

// The recorded verdicts are checked against the model by test/exploreRegression.test.ts (the cheap cells).
describe('the recorded verdicts cover the predicted matrix', () => {
  it('every row, store and fault class, in table order, each to the depth it was explored (at least 4, at most 8)', () => {
    const want = MATRIX_ROWS.flatMap((r) => r.stores.flatMap((s) => FAULT_CLASSES.map((f) => `${r.label}|${s}|${f}`)));
    expect(PREDICTED.cells.map((c) => `${c.row}|${c.store}|${c.fault}`)).toEqual(want);
    for (const c of PREDICTED.cells) expect([4, 5, 6, 7, 8]).toContain(c.depth);
  });
});

describe('statements in the spec agree with the model', () => {
  it('every property is stated under its ID with the title the code uses', () => {
    for (const id of PROPERTY_IDS) expect(SPEC, id).toContain(`**${id}** — *${PROPERTY_TITLES[id]}.*`);
  });

  it("LIVE-1's bound is the one the check uses", () => {
    expect(SPEC).toContain('`ceil(ttlMs * (1 + driftFactor)) + 1 + ε`');
    const example = /With ttl 1000 ms, driftFactor 0\.01 and ε = 0 the bound is (\d+) ms/.exec(SPEC);
    expect(Number(example?.[1])).toBe(liveBoundMs(1000, 0.01, 0));
  });

  it('each fault class description names exactly the fault kinds its exploration schedules', () => {
    for (const design of [designs.redlock(), designs.pgSession()]) {
      for (const fc of FAULT_CLASSES) {
        const named = [...FAULT_CLASS_ALLOWS[fc].matchAll(/`([a-z-]+)`/g)].map((m) => m[1]!).filter((k) => KINDS.has(k));
        expect([...new Set(named)].sort(), `${fc} on ${design.kind}`).toEqual(faultKindsOf(design, fc));
      }
    }
  });

  it('the delay class draws no latency beyond the ttl, as its description says', () => {
    const ttlMs = 10;
    const latencies = alphabetFor(designs.redisSingle(), 'delay', { clients: 1, resource: 'r', ttlMs, advanceMs: [1] }).flatMap((c) => (c.kind === 'acquire' && c.latencyMs !== undefined ? [c.latencyMs] : []));
    expect(Math.max(...latencies)).toBe(ttlMs);
    expect(FAULT_CLASS_ALLOWS.delay).toMatch(/exactly the ttl/);
    expect(FAULT_CLASS_ALLOWS.delay).not.toMatch(/beyond/);
  });

  it('a fault class the spec says holds for every variant holds in every predicted cell', () => {
    for (const fc of FAULT_CLASSES) {
      if (!new RegExp(`\\*\\*${fc}\\.\\*\\* All hold for every variant`).test(SPEC)) continue;
      const broken = PREDICTED.cells.filter((c) => c.fault === fc && Object.keys(c.found).length > 0);
      expect(broken.map((c) => `${c.row}/${c.store}: ${Object.keys(c.found).join(', ')}`), fc).toEqual([]);
    }
  });

  it('a PostgreSQL partition is one-sided in every text that describes it', () => {
    for (const [file, text] of [['spec/SPEC.md', SPEC], ['docs/choosing-a-lock.md', GUIDE], ['docs/postgres.md', read('docs/postgres.md')]] as const) {
      expect(text, file).not.toMatch(/keepalive ends it on both sides|partition[^.]*ends the client's session|notices? (at once|immediately) \(57P01\)/);
    }
    expect(PREDICTED.cells.find((c) => c.row === 'pg-session' && c.store === 'unfenced' && c.fault === 'partition')?.found).toEqual({ 'MUTEX-1': 4, 'STORE-1': 6 });
  });

  it('the matrix guide states the derived predictions as derivedProperties computes them', () => {
    const guide = read('docs/matrix-guide.md');
    expect(guide).toContain('MUTEX-1 together with FENCE-1');
    expect(guide).not.toMatch(/a predicted FENCE-1 predicts STORE-1/);
    expect(derivedProperties(new Set(['FENCE-1', 'DUR-1']), 'strict')).toEqual([]);
    expect(derivedProperties(new Set(['MUTEX-1', 'FENCE-1']), 'strict')).toEqual(['STORE-1']);
    expect(derivedProperties(new Set(['MUTEX-1']), 'unfenced')).toEqual(['STORE-1']);
  });

  it('attributions: the strict policy is not called the classic demonstration; monotonic is Kleppmann\'s rule', () => {
    expect(SPEC).not.toMatch(/classic demonstration/);
    expect(SPEC).toMatch(/\| `monotonic` \|[^\n]*Kleppmann's rule/);
    expect(SPEC).toMatch(/lockcheck's own extension/);
    expect(SPEC).toMatch(/concurrency\.Mutex/);
    expect(SPEC).toMatch(/redlock-rb/);
  });
});

describe('the guide is reachable and its links resolve', () => {
  it('README links the guide before any other document; the spec links it at the top', () => {
    const readme = read('README.md');
    const firstLink = /\]\(([^)]+\.md)[^)]*\)/.exec(readme)?.[1];
    expect(firstLink).toBe('docs/choosing-a-lock.md');
    expect(SPEC.slice(0, 600)).toContain('(../docs/choosing-a-lock.md)');
  });

  // Every guide a reader follows links through: the README, the spec, docs/ and the READMEs beside the code.
  const guides = ['README.md', 'spec/SPEC.md', ...readdirSync('docs').filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`), 'conformance/adapters/README.md'].filter((f) => existsSync(f));
  for (const file of guides) {
    it(`${file}: every relative link names a file that exists, and every anchor into a markdown file a heading there`, () => {
      for (const link of relativeLinks(file, read(file))) {
        const resolved = link.path === '' ? file : link.path;
        expect(existsSync(resolved), `${file} -> ${link.written}`).toBe(true);
        if (link.anchor !== null && resolved.endsWith('.md')) expect(anchors(read(resolved)).has(link.anchor), `${file} -> ${link.written}`).toBe(true);
      }
    });
  }
});

const KINDS = new Set(['acquire', 'extend', 'release', 'write', 'read', 'advance', 'clock-step', 'clock-drift', 'pause', 'resume', 'deliver', 'crash', 'restart', 'partition', 'heal', 'node-delay', 'kill-connection']);
