import { isObject, refuse as bad } from '../impl/options.ts';
import type { RunReport } from './verdict.ts';
import { PROPERTY_IDS, type PropertyId } from '../model/properties.ts';

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

export function checkRunReport(report: unknown): RunReport {
  if (!isObject(report)) bad('report', 'a RunReport (CheckFailure.report, from checkConformance)', report);
  if (typeof report.backend !== 'string') bad('report.backend', 'a string', report.backend);
  const v = report.verdict;
  if (!isObject(v) || !VERDICT_KINDS.includes(v.kind as string)) bad('report.verdict', `a verdict (kind ${VERDICT_KINDS.join(', ')})`, v);
  if ((v.kind === 'conformance-failure' || v.kind === 'property-violation') && (!isObject(v.step) || typeof v.step.index !== 'number')) bad('report.verdict.step', 'the failing step', v.step);
  if (v.kind === 'property-violation' && !Array.isArray(v.violations)) bad('report.verdict.violations', 'an array of violations', v.violations);
  // The properties a verdict names are the model's: the page gives each its title.
  if (v.kind === 'conformance-failure' && !PROPERTY_IDS.includes(v.property as PropertyId)) bad('report.verdict.property', `one of ${PROPERTY_IDS.join(', ')}`, v.property);
  if (v.kind === 'property-violation') {
    (v.violations as unknown[]).forEach((x, i) => {
      if (!isObject(x) || !PROPERTY_IDS.includes(x.property as PropertyId)) bad(`report.verdict.violations[${i}].property`, `one of ${PROPERTY_IDS.join(', ')}`, isObject(x) ? x.property : x);
    });
  }
  if (!isCount(report.clients)) bad('report.clients', `an integer in [0, ${MAX_LANES}]`, report.clients);
  if (!isCount(report.nodes)) bad('report.nodes', `an integer in [0, ${MAX_LANES}]`, report.nodes);
  if (!Array.isArray(report.findings)) bad('report.findings', 'an array of property violations', report.findings);
  if (report.deviations !== undefined && (!Array.isArray(report.deviations) || !report.deviations.every((d) => isObject(d) && isObject(d.step) && isObject(d.consequence)))) bad('report.deviations', 'an array of conformance failures', report.deviations);
  if (report.warnings !== undefined && (!Array.isArray(report.warnings) || !Array.from(report.warnings as unknown[]).every((w) => typeof w === 'string'))) bad('report.warnings', 'an array of strings', report.warnings);
  if (!Array.isArray(report.steps)) bad('report.steps', 'an array of executed steps', report.steps);
  report.steps.forEach((s: unknown, i) => {
    const at = `report.steps[${i}]`;
    if (!isObject(s) || !isObject(s.command) || !isObject(s.actual)) bad(at, 'an executed step ({ index, command, actual, allowed, violations, leases, nodes })', s);
    for (const list of ['allowed', 'violations', 'leases', 'nodes'] as const) if (!Array.isArray(s[list])) bad(`${at}.${list}`, 'an array', s[list]);
    if (typeof s.startMs !== 'number' || typeof s.endMs !== 'number') bad(`${at}.startMs/endMs`, 'numbers', typeof s.startMs !== 'number' ? s.startMs : s.endMs);
  });
  return report as unknown as RunReport;
}
