import { isObject, refuse as bad } from '../impl/options.ts';
import type { RunReport } from './verdict.ts';
import { PROPERTY_IDS, type PropertyId } from '../model/properties.ts';
import { CONSEQUENCE_KINDS } from './consequence.ts';

/**
 * The RunReport handed to textTimeline and htmlTimeline (a CheckFailure's
 * report), checked for its shape before anything is drawn: anything else is
 * InvalidInputError('invalid-config') naming the part and what was given,
 * never a TypeError from the template. Commands and outcomes inside the
 * steps are the model's describeCommand and describeOutcome's to judge.
 */

const VERDICT_KINDS = ['pass', 'inconclusive', 'conformance-failure', 'property-violation'];
/** Far above any run (16 clients, 15 nodes): a lane count beyond it is garbage, not a run. */
const MAX_LANES = 1000;

const isCount = (n: unknown): boolean => typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= MAX_LANES;

const isFiniteNumber = (n: unknown): n is number => typeof n === 'number' && Number.isFinite(n);
const isProperty = (p: unknown): p is PropertyId => PROPERTY_IDS.includes(p as PropertyId);

/** What a timeline reads of a step: every part the text and the page interpolate or compute with, so a hand-made report fails here, naming the part. */
function checkStep(s: unknown, at: string): void {
  if (!isObject(s) || !isObject(s.command) || !isObject(s.actual)) bad(at, 'an executed step ({ index, command, actual, allowed, violations, leases, nodes })', s);
  if (!Number.isSafeInteger(s.index) || (s.index as number) < 0) bad(`${at}.index`, 'a step index (an integer >= 0)', s.index);
  for (const list of ['allowed', 'violations', 'leases', 'nodes'] as const) if (!Array.isArray(s[list])) bad(`${at}.${list}`, 'an array', s[list]);
  if (!isFiniteNumber(s.startMs)) bad(`${at}.startMs`, 'a finite number of ms', s.startMs);
  if (!isFiniteNumber(s.endMs)) bad(`${at}.endMs`, 'a finite number of ms', s.endMs);
  // Array.from: every index, holes included (forEach skips them).
  Array.from(s.allowed as unknown[]).forEach((o, i) => {
    if (!isObject(o) || typeof o.kind !== 'string') bad(`${at}.allowed[${i}]`, 'an outcome (an object with a kind)', o);
  });
  Array.from(s.violations as unknown[]).forEach((v, i) => checkViolation(v, `${at}.violations[${i}]`));
  Array.from(s.leases as unknown[]).forEach((l, i) => {
    const li = `${at}.leases[${i}]`;
    if (!isObject(l)) bad(li, 'a lease ({ client, resource, token, validUntilTrueMs })', l);
    if (!isCount(l.client)) bad(`${li}.client`, `a client index (an integer in [0, ${MAX_LANES}])`, l.client);
    if (typeof l.resource !== 'string') bad(`${li}.resource`, 'a string', l.resource);
    if (typeof l.token !== 'bigint') bad(`${li}.token`, 'a bigint', l.token);
    if (l.validUntilTrueMs !== null && !isFiniteNumber(l.validUntilTrueMs)) bad(`${li}.validUntilTrueMs`, 'a finite number of ms or null', l.validUntilTrueMs);
  });
  Array.from(s.nodes as unknown[]).forEach((n, i) => {
    const ni = `${at}.nodes[${i}]`;
    if (!isObject(n)) bad(ni, "a node's view ({ up, clockOffsetMs })", n);
    if (typeof n.up !== 'boolean') bad(`${ni}.up`, 'a boolean', n.up);
    if (!isFiniteNumber(n.clockOffsetMs)) bad(`${ni}.clockOffsetMs`, 'a finite number of ms', n.clockOffsetMs);
  });
}

function checkViolation(v: unknown, at: string): void {
  if (!isObject(v)) bad(at, 'a violation ({ property, message })', v);
  if (!isProperty(v.property)) bad(`${at}.property`, `one of ${PROPERTY_IDS.join(', ')}`, v.property);
  if (typeof v.message !== 'string') bad(`${at}.message`, 'a string', v.message);
}

/** A conformance failure as the report names it: the verdict's own, and each deviation a library audit went past. */
function checkDeviation(d: unknown, at: string): void {
  if (!isObject(d)) bad(at, 'a conformance failure ({ property, consequence, message, step })', d);
  if (!isProperty(d.property)) bad(`${at}.property`, `one of ${PROPERTY_IDS.join(', ')}`, d.property);
  const c = d.consequence;
  if (!isObject(c) || !(CONSEQUENCE_KINDS as readonly unknown[]).includes(c.kind) || typeof c.what !== 'string') bad(`${at}.consequence`, `a consequence ({ kind: ${CONSEQUENCE_KINDS.join(' | ')}, what })`, c);
  if (typeof d.message !== 'string') bad(`${at}.message`, 'a string', d.message);
  checkStep(d.step, `${at}.step`);
}

export function checkRunReport(report: unknown): RunReport {
  if (!isObject(report)) bad('report', 'a RunReport (CheckFailure.report, from checkConformance)', report);
  if (typeof report.backend !== 'string') bad('report.backend', 'a string', report.backend);
  const v = report.verdict;
  if (!isObject(v) || !VERDICT_KINDS.includes(v.kind as string)) bad('report.verdict', `a verdict (kind ${VERDICT_KINDS.join(', ')})`, v);
  if (v.kind === 'inconclusive' && typeof v.reason !== 'string') bad('report.verdict.reason', 'a string', v.reason);
  // The properties a verdict names are the model's: the page gives each its title.
  if (v.kind === 'conformance-failure') checkDeviation(v, 'report.verdict');
  if (v.kind === 'property-violation') {
    if (!Array.isArray(v.violations)) bad('report.verdict.violations', 'an array of violations', v.violations);
    Array.from(v.violations as unknown[]).forEach((x, i) => checkViolation(x, `report.verdict.violations[${i}]`));
    checkStep(v.step, 'report.verdict.step');
  }
  if (!isCount(report.clients)) bad('report.clients', `an integer in [0, ${MAX_LANES}]`, report.clients);
  if (!isCount(report.nodes)) bad('report.nodes', `an integer in [0, ${MAX_LANES}]`, report.nodes);
  if (!Array.isArray(report.findings)) bad('report.findings', 'an array of property violations', report.findings);
  if (report.deviations !== undefined) {
    if (!Array.isArray(report.deviations)) bad('report.deviations', 'an array of conformance failures', report.deviations);
    Array.from(report.deviations as unknown[]).forEach((d, i) => checkDeviation(d, `report.deviations[${i}]`));
  }
  if (report.warnings !== undefined && (!Array.isArray(report.warnings) || !Array.from(report.warnings as unknown[]).every((w) => typeof w === 'string'))) bad('report.warnings', 'an array of strings', report.warnings);
  if (!Array.isArray(report.steps)) bad('report.steps', 'an array of executed steps', report.steps);
  Array.from(report.steps as unknown[]).forEach((s, i) => checkStep(s, `report.steps[${i}]`));
  return report as unknown as RunReport;
}
