import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DESIGN_KINDS, designs, hasTtl } from '../model/design.ts';
import { alphabetFor, FAULT_CLASS_ALLOWS, FAULT_CLASSES } from '../model/faultClass.ts';
import { derivedProperties, explorationKey, MATRIX_ROWS } from '../model/matrix.ts';
import { liveBoundMs, PROPERTY_IDS, PROPERTY_TITLES, type PropertyId } from '../model/properties.ts';
import type { Predicted } from '../spec/tables.ts';
import { blockIn, blocks, cellText, faultKindsOf, rowOf, VERDICTS_FILE } from '../spec/tables.ts';
import { BUILT_INS, MEASURED_FAULT_CLASSES } from '../cli/backends.ts';
import { parseReplayWord, replayExplored } from '../cli/exploreReplay.ts';
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

  it("8.2's hand-written verdicts (the 'breaks' column, per fault class) are the predicted matrix's, derived properties included", () => {
    // 8.2 said redis-replicated's strict crash-restart cell had STORE-1 only derived, after depth 8 had reached it (found by an audit).
    const rowsOf: Record<string, string[]> = {
      'redis-single (both), redis-replicated (both), redlock (all three), etcd-lease': MATRIX_ROWS.filter((r) => r.design.kind !== 'pg-session' && r.design.kind !== 'pg-xact').map((r) => r.label),
      'redis-single (both), redis-replicated (both)': MATRIX_ROWS.filter((r) => r.design.kind === 'redis-single' || r.design.kind === 'redis-replicated').map((r) => r.label),
      'redlock (all three)': MATRIX_ROWS.filter((r) => r.design.kind === 'redlock').map((r) => r.label),
      'redis-single, none': ['redis-single(none)'],
      'redis-single, aof-always': ['redis-single(aof-always)'],
      'redlock(5), none': ['redlock(5 nodes, none)'],
      'redlock(5), aof-always': ['redlock(5 nodes, aof-always)'],
      'redlock(5), none, delayed restart': MATRIX_ROWS.filter((r) => r.design.kind === 'redlock' && r.design.restartDelayMs > 0).map((r) => r.label),
      'redis-replicated, async': ['redis-replicated(async)'],
      'redis-replicated, WAIT 1': ['redis-replicated(WAIT 1)'],
      'pg-session, pg-xact': ['pg-session', 'pg-xact'],
      'pg-session': ['pg-session'],
      'pg-xact': ['pg-xact'],
      'etcd-lease': ['etcd-lease'],
    };
    for (const labels of Object.values(rowsOf)) for (const l of labels) expect(MATRIX_ROWS.map((r) => r.label), l).toContain(l);
    const cell = (row: string, store: string, fault: string) => PREDICTED.cells.find((c) => c.row === row && c.store === store && c.fault === fault)!;
    /** What the predicted matrix shows in a cell: the properties explored broken, then those only derived from them (italic) marked so. */
    const shown = (c: (typeof PREDICTED.cells)[number]): string[] => {
      const found = new Set(PROPERTY_IDS.filter((id) => c.found[id] !== undefined));
      return PROPERTY_IDS.flatMap((id) => (found.has(id) ? [id] : derivedProperties(found, c.store).includes(id) ? [`${id} derived`] : []));
    };
    const reasons = SPEC.slice(SPEC.indexOf('### 8.2'), SPEC.indexOf('### 8.3'));
    const wrong: string[] = [];
    let judged = 0;
    for (const part of reasons.split(/^(?=\*\*[a-z-]+\*\* \()/m).slice(1)) {
      const fault = /^\*\*([a-z-]+)\*\*/.exec(part)![1]!;
      expect(FAULT_CLASSES, fault).toContain(fault);
      if (!part.includes('| variant | breaks | reason |')) continue;
      for (const m of part.matchAll(/^\| ([^|]+) \| ([^|]+) \| [^|]+ \|$/gm)) {
        const [variant, breaks] = [m[1]!.trim(), m[2]!.trim()];
        if (variant === 'variant' || variant === '---') continue;
        const rows = rowsOf[variant];
        expect(rows, `8.2 ${fault}: variant '${variant}' (add it to this test's map)`).toBeDefined();
        for (const row of rows!) {
          for (const store of MATRIX_ROWS.find((r) => r.label === row)!.stores) {
            const c = cell(row, store, fault);
            // 'unfenced: …; fenced: …' splits by store ('the same': as the unfenced); otherwise the clause is every store's.
            const byStore = /^unfenced: (.*?); fenced: (.*)$/.exec(breaks);
            let claim = byStore === null ? breaks : store === 'unfenced' ? byStore[1]! : byStore[2]! === 'the same (8.1 notes)' || byStore[2]!.startsWith('the same') ? byStore[1]! : byStore[2]!;
            // 'as in the partition column': the cell shows what the same row's partition cell shows.
            if (/as in the partition column/.test(claim)) claim = shown(cell(row, store, 'partition')).join(', ') || '—';
            // A clause for a depth beyond the cell's ('FENCE-1 at depth 9') names what the table cannot show.
            const named = claim.split(';').filter((clause) => !/at depth (\d+)/.test(clause) || Number(/at depth (\d+)/.exec(clause)![1]) <= c.depth);
            // 'STORE-1 derived' (or '(and STORE-1 derived, …)') claims the italic entry; an ID alone, an explored break.
            const derivedClaims = named.flatMap((clause) => [...clause.matchAll(/\(([^()]*\bderived\b[^()]*)\)|([A-Z]+-\d) derived/g)].map((m) => m[1] ?? m[2]!)).join(' ');
            const ids = PROPERTY_IDS.flatMap((id) => (!named.some((clause) => clause.includes(id)) ? [] : derivedClaims.includes(id) ? [`${id} derived`] : [id]));
            judged++;
            if (ids.join() !== shown(c).join()) wrong.push(`8.2 ${fault} ${row}/${store}: says ${ids.join(', ') || '—'}, the matrix shows ${shown(c).join(', ') || '—'}`);
          }
        }
      }
    }
    expect(judged).toBeGreaterThan(60);
    expect(wrong).toEqual([]);
  });

  it('section 8 names every row of the predicted matrix, and says what the exploration schedules of a pause with an operation in flight', () => {
    // The rows paragraph had lost redis-replicated, and 8 said the exploration scheduled no pause with an operation in flight
    // while the timing class holds an extend (an acquire on PostgreSQL) across its client's pause (found by an audit).
    const rows = /^Rows: ([\s\S]*?)\n\n/m.exec(SPEC)?.[1]?.replace(/\s+/g, ' ');
    expect(rows).toBeDefined();
    for (const r of MATRIX_ROWS) expect(rows, r.label).toContain(`\`${r.design.kind}\``);
    const inFlight = new Map<string, Set<string>>();
    for (const r of MATRIX_ROWS) {
      for (const fc of FAULT_CLASSES) {
        const alphabet = alphabetFor(r.design, fc);
        expect(alphabet.some((c) => c.kind === 'acquire' && c.retries !== undefined), `${r.label} ${fc}: a blocking acquire`).toBe(false);
        for (const c of alphabet) if (c.kind === 'pause' && c.inFlight !== undefined) inFlight.set(fc, (inFlight.get(fc) ?? new Set()).add(c.inFlight.kind));
      }
    }
    const says = /^Blocking acquires and pauses with ([\s\S]*?)\n\n/m.exec(SPEC)?.[1]?.replace(/\s+/g, ' ');
    expect(says).toBeDefined();
    expect(inFlight.size).toBeGreaterThan(0);
    for (const [fc, kinds] of inFlight) {
      expect(says, fc).toContain(`\`${fc}\``);
      for (const k of kinds) expect(says, `${fc}: ${k} in flight`).toContain(`\`${k}\` in flight`);
    }
    // Section 3's pause row does not restrict to ttl designs an operation a PostgreSQL design's exploration holds in flight.
    const pauseRow = /^\| `pause` \| ([^|]*) \|/m.exec(SPEC)![1]!;
    const pgInFlight = new Set(MATRIX_ROWS.filter((r) => !hasTtl(r.design)).flatMap((r) => FAULT_CLASSES.flatMap((fc) => alphabetFor(r.design, fc).flatMap((c) => (c.kind === 'pause' && c.inFlight !== undefined ? [c.inFlight] : [])))));
    for (const op of pgInFlight) if (op.kind === 'acquire' && op.retries === undefined) expect(pauseRow).not.toMatch(/an `acquire`( or `extend`)? only on ttl designs/);
  });

  it("section 5's 'Broken by' names every design whose predicted cells break the property, where only some designs do", () => {
    // DUR-1's and FENCE-1's named redis-single and redlock but not redis-replicated, whose failover breaks both (found by an audit).
    const kinds = new Set(MATRIX_ROWS.map((r) => r.design.kind));
    let judged = 0;
    for (const id of PROPERTY_IDS) {
      const breaking = new Set(PREDICTED.cells.filter((c) => c.found[id] !== undefined).map((c) => MATRIX_ROWS.find((r) => r.label === c.row)!.design.kind));
      // A property every design breaks somewhere (MUTEX-1 by a slow client clock) needs no list.
      if (breaking.size === 0 || breaking.size === kinds.size) continue;
      const paragraph = SPEC.slice(SPEC.indexOf(`**${id}** — `)).split('\n\n')[0]!.replace(/\s+/g, ' ');
      const brokenBy = /Broken by: (.*)$/.exec(paragraph)?.[1] ?? '';
      const named = new Set([...brokenBy.matchAll(/`([a-z-]+)`/g)].map((m) => m[1]!).filter((k) => kinds.has(k as never)));
      // One stated by cause alone (STORE-1: an unfenced store under any fault that lets an old holder write late) names none.
      if (named.size === 0) continue;
      judged++;
      expect([...breaking].filter((k) => !named.has(k)), `${id}: designs its 'Broken by' leaves out`).toEqual([]);
    }
    expect(judged).toBeGreaterThan(2);
  });

  it('section 8 names every cell where the measured matrix and the prediction differ (the guide marks them !)', () => {
    const table = blockIn(GUIDE, 'measured-vs-predicted')!;
    const header = table.split('\n')[0]!.split('|').slice(2, -1).map((c) => c.trim());
    const differ = table.split('\n').slice(2).flatMap((line) => {
      const cells = line.split('|').slice(1, -1).map((c) => c.trim());
      return cells.slice(1).flatMap((c, i) => (c.endsWith(' !') ? [{ backend: cells[0]!, column: header[i]! }] : []));
    });
    const says = SPEC.slice(SPEC.indexOf('## 8. '), SPEC.indexOf('### 8.1')).split('\n\n').find((p) => p.includes('measured-beside-predicted'))?.replace(/\s+/g, ' ') ?? '';
    expect(says).toMatch(/the one difference|no difference|differences/);
    for (const d of differ) expect(says, `${d.backend} ${d.column}`).toContain(`${d.backend.split('/')[0]} under ${d.column}`);
    expect(says.includes('the one difference')).toBe(differ.length === 1);
  });

  it("section 1's worked example quotes the predicted matrix's cells as they are", () => {
    const example = /the cell\s+`([^`]+)`\s+under\s+`([a-z-]+)`\s+reads,\s+unfenced,\s+`([^`]+)`[\s\S]*?strict,\s+`([^`]+)`/.exec(SPEC);
    expect(example).not.toBeNull();
    const [, row, fault, unfenced, strict] = example!;
    for (const [store, quoted] of [['unfenced', unfenced], ['strict', strict]] as const) {
      const c = PREDICTED.cells.find((x) => x.row === row && x.store === store && x.fault === fault);
      expect(c, `${row}/${store}/${fault}`).toBeDefined();
      expect(quoted, `${row}/${store}/${fault}`).toBe(cellText(c!));
    }
  });

  it('the counts of cells and explorations the spec and docs/model.md give are the matrix\'s', () => {
    const cells = MATRIX_ROWS.flatMap((r) => r.stores.flatMap((s) => FAULT_CLASSES.map((f) => ({ r, s, f }))));
    const keys = new Map<string, number>();
    for (const c of cells) keys.set(explorationKey(c.r, c.s, c.f), (keys.get(explorationKey(c.r, c.s, c.f)) ?? 0) + 1);
    const shared = (kind: string, size: number): number => [...keys.entries()].filter(([k, n]) => n === size && cells.some((c) => c.r.design.kind === kind && explorationKey(c.r, c.s, c.f) === k)).length;
    const spec = /\((\d+) redis-single pairs and (\d+) Redlock triples: (\d+) explorations for the (\d+) cells\)/.exec(SPEC.replace(/\s+/g, ' '));
    expect(spec).not.toBeNull();
    expect(spec!.slice(1).map(Number)).toEqual([shared('redis-single', 2), shared('redlock', 3), keys.size, cells.length]);
    const model = /the (\d+) cells take (\d+) explorations/.exec(read('docs/model.md').replace(/\s+/g, ' '));
    expect(model?.slice(1).map(Number)).toEqual([cells.length, keys.size]);
  });

  it('docs/matrix.md quotes, for each built-in row, the depth the predicted matrix records for its column\'s model classes', () => {
    // Two records of one exploration: the seeds (docs/matrix.md's "[model to k]") and test/fixtures/explore-verdicts.json (8.1's "[to k]").
    const header = MATRIX_MD.split('\n').find((l) => l.startsWith('| backend |'))!;
    const columns = header.split('|').slice(2, -1).map((c) => c.trim());
    let judged = 0;
    const wrong: string[] = [];
    for (const b of BUILT_INS) {
      const row = rowOf(b.design);
      const line = MATRIX_MD.split('\n').find((l) => l.startsWith(`| ${b.name} |`));
      if (row === undefined || line === undefined) continue;
      const cells = line.split(' | ').slice(1);
      for (const col of MEASURED_FAULT_CLASSES.filter((c) => columns.includes(c.id))) {
        const quoted = /\[model to (\d+)\]/.exec(cells[columns.indexOf(col.id)] ?? '')?.[1];
        if (quoted === undefined) continue;
        judged++;
        const depth = Math.min(...PREDICTED.cells.filter((c) => c.row === row.label && c.store === b.store && col.model.includes(c.fault)).map((c) => c.depth));
        if (Number(quoted) !== depth) wrong.push(`${b.name} ${col.id}: docs/matrix.md says model to ${quoted}, 8.1 records ${depth}`);
      }
    }
    expect(judged).toBeGreaterThan(60);
    expect(wrong).toEqual([]);
  });

  it('every `lockcheck explore --replay` the spec and docs give replays on this model, breaks its property at its last step, and is as short as its cell\'s shortest', () => {
    // A replay word is alphabet indices and branches: a model change that renumbers an alphabet makes a quoted one replay
    // something else, or nothing. Each must still be the counterexample its text says (section 8.1's table, getting-started's).
    const pages = ['README.md', 'spec/SPEC.md', ...readdirSync('docs').filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    const words = pages.flatMap((p) => [...read(p).matchAll(/lockcheck explore --replay '([^'\n]+)'/g)].map((m) => ({ where: `${p}: ${m[1]!}`, word: m[1]! })))
      // A placeholder ('…', `<word>`) names no counterexample.
      .filter((w) => !/[<…]|\.\.\./.test(w.word));
    expect(words.length).toBeGreaterThan(8);
    const wrong: string[] = [];
    for (const w of words) {
      const r = parseReplayWord(w.word);
      const got = replayExplored(r);
      const shortest = PREDICTED.cells.find((c) => c.row === r.row.label && c.store === r.store && c.fault === r.fault)?.found[r.property];
      if (got.violation === null) wrong.push(`${w.where}: does not break ${r.property} at its last step`);
      else if (got.steps.length !== shortest) wrong.push(`${w.where}: ${got.steps.length} steps, the cell's shortest is ${String(shortest)}`);
    }
    expect(wrong).toEqual([]);
    // The 8.1 table's cells quote the lengths the matrix records.
    const table = SPEC.slice(SPEC.indexOf('**Shortest counterexamples to start from.**'), SPEC.indexOf('### 8.2'));
    const quoted = [...table.matchAll(/^\| [^|]+ \| `([^`]+)` \/ ([a-z]+) \/ ([a-z-]+): ([^|]+) \|/gm)];
    expect(quoted.length).toBeGreaterThan(5);
    for (const q of quoted) {
      const c = PREDICTED.cells.find((x) => x.row === q[1] && x.store === q[2] && x.fault === q[3]);
      expect(c, q[0]).toBeDefined();
      for (const m of q[4]!.matchAll(/([A-Z]+-\d) \((\d+)\)/g)) expect(c!.found[m[1] as PropertyId], `${q[1]}/${q[2]}/${q[3]} ${m[1]}`).toBe(Number(m[2]));
    }
  });

  it("4.3's table gives every code of model/errors.ts's ModelErrorCode, and no other", () => {
    const union = [...(/export type ModelErrorCode =([^;]*);/.exec(read('model/errors.ts'))?.[1] ?? '').matchAll(/'([a-z-]+)'/g)].map((m) => m[1]!);
    const table = SPEC.slice(SPEC.indexOf('### 4.3'), SPEC.indexOf('## 5. '));
    const stated = [...table.matchAll(/^\| ((?:`[a-z-]+`(?: \/ )?)+) \|/gm)].flatMap((m) => [...m[1]!.matchAll(/`([a-z-]+)`/g)].map((c) => c[1]!)).filter((c) => c !== 'code');
    expect(union.length).toBeGreaterThan(5);
    expect([...stated].sort()).toEqual([...union].sort());
  });

  it("section 7's table and its subsections name every design kind, and no other", () => {
    const section7 = SPEC.slice(SPEC.indexOf('## 7. '), SPEC.indexOf('## 8. '));
    const table = [...section7.matchAll(/^\| `([a-z-]+)` \| /gm)].map((m) => m[1]!);
    expect([...table].sort()).toEqual([...DESIGN_KINDS].sort());
    const headed = [...section7.matchAll(/^### 7\.\d+ `([a-z-]+)`$/gm)].map((m) => m[1]!).filter((k) => k !== 'zookeeper');
    // ZooKeeper's subsection (7.10) is judged by etcd-lease's design, not a kind of its own.
    expect([...headed].sort()).toEqual([...DESIGN_KINDS].sort());
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
