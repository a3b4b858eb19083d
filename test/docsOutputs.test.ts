import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BROKEN } from './fixtures/broken.ts';
import { lockcheckAsync } from './lockcheckProcess.ts';
import { testTempDir } from './tempDirs.ts';

/**
 * What the docs show a command printing is what it prints: each sample is run
 * here (in memory, no servers) and compared with its real output. The
 * counterexample of docs/conformance.md had lost a line and a clause to
 * later changes of the failure's text, and the catalogue's counts had
 * stayed at 34 of 42 (found by an audit).
 */
const text = (path: string): string => readFileSync(path, 'utf8');
const dir = testTempDir('lockcheck-docs-outputs-');

/** The plain (untagged) or `tag` code blocks of a page, in order. */
const blocksOf = (page: string, tag = ''): string[] => [...text(page).matchAll(new RegExp(`^\`\`\`${tag}\\n([\\s\\S]*?)^\`\`\`$`, 'gm'))].map((m) => m[1]!);
/** `lines` appear in `output` one after another, each whole. */
const contiguous = (output: string, lines: readonly string[]): boolean => {
  const out = output.split('\n');
  return out.some((_, i) => lines.every((l, j) => out[i + j] === l));
};

describe('docs/conformance.md', () => {
  const page = text('docs/conformance.md');

  it('the counterexample it reads is what `lockcheck run` prints for the broken backend it names', async () => {
    const sample = /^## Reading a counterexample\n[\s\S]*?`lockcheck run --backend (\S+)`[\s\S]*?```\n([\s\S]*?)```/m.exec(page);
    expect(sample, 'a sample output and the command that prints it').not.toBeNull();
    const run = await lockcheckAsync(['run', '--backend', sample![1]!, '--counterexample', join(dir, 'ce.json')]);
    expect(run.code, run.stderr).toBe(1);
    const lines = sample![2]!.replace(/\n$/, '').split('\n');
    expect(lines.length).toBeGreaterThan(3);
    expect(contiguous(run.stdout, lines), `docs/conformance.md's sample is not in the output:\n${run.stdout}`).toBe(true);
  });

  it('the broken-backend catalogue has as many backends, and blind spots, as it says', () => {
    const counts = /`test\/fixtures\/broken\.ts` holds (\d+) backends[^(]*\((\d+) of them, marked with the `blindSpot`/.exec(page);
    expect(counts).not.toBeNull();
    expect(Number(counts![1])).toBe(BROKEN.length);
    expect(Number(counts![2])).toBe(BROKEN.filter((b) => b.blindSpot !== undefined).length);
  });
});

describe('docs/histories.md', () => {
  const page = 'docs/histories.md';
  const sample = blocksOf(page, 'jsonl')[0]!;

  it('the malformed history\'s message is the one `lockcheck check` prints for that mistake in the sample history', async () => {
    const shown = /field and the problem, and `lockcheck check` exits 2:\n\n```\n(.*)\n```/.exec(text(page));
    expect(shown).not.toBeNull();
    const where = /^lockcheck: (\S+) is not a valid history: line (\d+), field '(\w+)': .*, got (\d+)$/.exec(shown![1]!);
    expect(where, shown![1]).not.toBeNull();
    const [, file, line, field, value] = where!;
    // The sample history with that field of that line made what the message says it got.
    const lines = sample.split('\n');
    lines[Number(line) - 1] = lines[Number(line) - 1]!.replace(new RegExp(`"${field}":"[^"]*"`), `"${field}":${value}`);
    writeFileSync(join(dir, file!), lines.join('\n'));
    const check = await lockcheckAsync(['check', join(dir, file!)]);
    expect(check.code).toBe(2);
    expect(check.stderr.split('\n')[0]!.replace(join(dir, file!), file!)).toBe(shown![1]);
  });

  it('the --json report\'s sample names the fields the report has, and only those', async () => {
    const shown = blocksOf(page, 'json')[0]!;
    // The sample, and the fields the sentence before it names.
    const before = /^`--json` prints a `CheckReport`([\s\S]*?)```json/m.exec(text(page))![1]!;
    // Two holds of 'r' at once, a write from each, one rejected: every part of the report has something in it.
    writeFileSync(
      join(dir, 'v.jsonl'),
      [
        '{"type":"meta","store":"strict"}',
        '{"type":"invoke","process":0,"time":0,"op":"acquire","resource":"r","ttlMs":100}',
        '{"type":"ok","process":0,"time":4,"op":"acquire","resource":"r","owner":"a","token":"1","validUntil":80}',
        '{"type":"invoke","process":1,"time":5,"op":"acquire","resource":"r","ttlMs":100}',
        '{"type":"ok","process":1,"time":6,"op":"acquire","resource":"r","owner":"b","token":"2","validUntil":90}',
        '{"type":"invoke","process":1,"time":7,"op":"write","resource":"r","key":"k","value":"b","token":"2"}',
        '{"type":"ok","process":1,"time":8,"op":"write","resource":"r","key":"k"}',
        '{"type":"invoke","process":0,"time":9,"op":"write","resource":"r","key":"k","value":"a","token":"1"}',
        '{"type":"fail","process":0,"time":10,"op":"write","resource":"r","key":"k","reason":"rejected"}',
      ].join('\n'),
    );
    // docs/getting-started.md's exit codes: a --report directory that does not exist is made (not exit 2), with those on the way.
    const check = await lockcheckAsync(['check', join(dir, 'v.jsonl'), '--json', '--report', join(dir, 'new/report')]);
    expect(check.code, check.stderr).toBe(1);
    expect(existsSync(join(dir, 'new/report/history.html'))).toBe(true);
    expect(text('docs/getting-started.md')).toContain('(`--out` and `--report` are made, with the directories on the way)');
    const report = JSON.parse(check.stdout) as Record<string, unknown> & { findings: object[]; counts: object };
    const keysIn = (value: unknown): string[] => (Array.isArray(value) ? value.flatMap(keysIn) : typeof value === 'object' && value !== null ? Object.entries(value).flatMap(([k, v]) => [k, ...keysIn(v)]) : []);
    const real = new Set(keysIn(report));
    const shownKeys = [...shown.matchAll(/"(\w+)":/g)].map((m) => m[1]!);
    const namedKeys = [...before.matchAll(/`(\w+)`/g)].map((m) => m[1]!);
    expect(shownKeys.filter((k) => !real.has(k)), 'fields the sample shows that the report does not have').toEqual([]);
    // Every top-level field is shown; within counts and findings the sample may stop at `...`.
    expect(Object.keys(report).filter((k) => !shownKeys.includes(k) && !namedKeys.includes(k)), 'top-level fields the sample leaves out').toEqual([]);
    expect(Object.keys(report.findings[0]!).filter((k) => !shownKeys.includes(k))).toEqual([]);
  });
});

describe('docs/matrix-guide.md', () => {
  it('its sample of the markdown has the shape of a cell of lockcheck\'s own rows in the measured docs/matrix.md', () => {
    // The shape lockstepText and cellText (cli/matrix.ts) write: a link, the properties or "all hold", the flags, the model's
    // depth, then the concurrent line. The sample had lost the last two (found by an audit).
    const cell = /^(?:\[🔎\]\(matrix\/[\w.-]+\.html\) )?(?:all hold|[A-Z]+-\d(?:, [A-Z]+-\d)*)(?: \([^()]*\))? \[model to \d+\](?:<br>concurrent: (?:.+ \(\d+ ops?, \d+ faults?\)|nothing \([^()]+\)))?$/;
    const cellsOf = (table: string, ownOnly: boolean): string[] =>
      table.split('\n').filter((l) => /^\| [\w-]+\/[\w-]+ \|/.test(l) && (!ownOnly || !l.startsWith('| lib:'))).flatMap((l) => l.split(' | ').slice(1).map((c) => c.replace(/ \|$/, '')));
    const measured = cellsOf(text('docs/matrix.md'), true).filter((c) => !c.startsWith('— (not measured'));
    expect(measured.length).toBeGreaterThan(50);
    expect(measured.filter((c) => !cell.test(c))).toEqual([]);
    const sample = /^## The markdown\n\n```\n([\s\S]*?)```/m.exec(text('docs/matrix-guide.md'))![1]!;
    const shown = cellsOf(sample, false);
    expect(shown.length).toBeGreaterThan(1);
    expect(shown.filter((c) => !cell.test(c))).toEqual([]);
  });
});

describe('docs/getting-started.md', () => {
  it('the message it quotes for a number out of its range is the one the command line prints', async () => {
    // It said the range was in `lockcheck --help`, which gives none (found by an audit); the message does.
    const quoted = /the message for one outside names it, e\.g\. `(--runs must be an integer in \[\d+, \d+\])`/.exec(text('docs/getting-started.md').replace(/\s+/g, ' '));
    expect(quoted).not.toBeNull();
    const run = await lockcheckAsync(['run', '--backend', 'redis-single/strict', '--runs', '0']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`lockcheck: ${quoted![1]!} in decimal digits, got '0'`);
  });
});

describe('docs/choosing-a-lock.md', () => {
  it('each timeline drawn from a counterexample has that counterexample\'s tokens, values, times, nodes and cut links', () => {
    // The matrix's counterexamples are measured again by every `npm start`; two drawings still showed an earlier run's
    // values, times and nodes (found by an audit).
    const page = text('docs/choosing-a-lock.md');
    const drawings = [...page.matchAll(/\[counterexample\]\((matrix\/[\w.-]+\.txt)\)\):\n\n```\n([\s\S]*?)```/g)];
    expect(drawings.length).toBeGreaterThan(3);
    const wrong = drawings.flatMap(([, file, drawing]) => {
      const ce = text(`docs/${file!}`);
      const steps = ce.split('\n').filter((l) => /^\s+\d+\. t=/.test(l)).join('\n');
      const problems: string[] = [];
      const tokens = (s: string, re: RegExp): string[] => [...new Set([...s.matchAll(re)].map((m) => m[1]!))].sort();
      if (tokens(drawing!, /token (\d+)/g).join() !== tokens(steps, /granted, token (\d+)/g).join()) problems.push(`tokens ${tokens(drawing!, /token (\d+)/g).join()} (granted: ${tokens(steps, /granted, token (\d+)/g).join()})`);
      for (const [, v] of drawing!.matchAll(/"([^"]+)"/g)) if (!steps.includes(`"${v}"`)) problems.push(`value "${v}"`);
      const times = new Set([...steps.matchAll(/t=(\d+)\.\.(\d+) ms/g)].flatMap((m) => [m[1]!, m[2]!]));
      for (const t of /^t \(ms\)(.*)$/m.exec(drawing!)?.[1]?.trim().split(/\s+/) ?? []) if (!times.has(t)) problems.push(`time ${t}`);
      for (const [, n] of drawing!.matchAll(/^node (\d+) /gm)) if (!new RegExp(`\\b(?:node |n)${n}\\b`).test(ce)) problems.push(`node ${n}`);
      for (const [, c, ns] of drawing!.matchAll(/^client (\d+) +\(cut from nodes ([\d, ]+)\)/gm)) {
        const cut = [...steps.matchAll(new RegExp(`link client ${c} <-> node (\\d+) cut`, 'g'))].map((m) => m[1]!).sort().join(', ');
        if (cut !== ns!.split(/,\s*/).sort().join(', ')) problems.push(`client ${c} cut from nodes ${ns} (the counterexample: ${cut})`);
      }
      return problems.map((p) => `${file}: ${p}`);
    });
    expect(wrong).toEqual([]);
  });
});
