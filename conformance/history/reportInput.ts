import { isObject, refuse as bad } from '../../impl/options.ts';
import type { CheckReport, CheckResult } from './check.ts';

/**
 * The check results and report handed to overallVerdict, historyReportHtml
 * and writeHistoryReport, checked for the shape checkHistory gives them:
 * anything else is InvalidInputError('invalid-config') naming the part and
 * what was given, never a TypeError from the page's template (nor a file
 * half written).
 */

const VERDICTS = ['safe', 'violation', 'unknown'];

export function checkResults(checks: unknown, name = 'checks'): readonly CheckResult[] {
  if (!Array.isArray(checks)) bad(name, 'an array of check results (CheckReport.checks)', checks);
  // Array.from: every index, holes included (forEach skips them).
  Array.from(checks as unknown[]).forEach((c: unknown, i) => {
    const at = `${name}[${i}]`;
    if (!isObject(c)) bad(at, 'a check result ({ check, property, verdict, findings })', c);
    if (!VERDICTS.includes(c.verdict as string) && c.verdict !== 'skipped') bad(`${at}.verdict`, `one of ${VERDICTS.join(', ')}, skipped`, c.verdict);
    if (typeof c.check !== 'string') bad(`${at}.check`, 'a string', c.check);
    if (typeof c.property !== 'string') bad(`${at}.property`, 'a string', c.property);
    // An undecided check has no count (null); a decided one has a count, never null.
    if (c.verdict === 'unknown' ? c.findings !== null : !Number.isSafeInteger(c.findings) || (c.findings as number) < 0) bad(`${at}.findings`, c.verdict === 'unknown' ? 'null (an undecided check counted nothing)' : 'a count (an integer >= 0)', c.findings);
    if (c.verdict === 'unknown' && typeof c.note !== 'string') bad(`${at}.note`, 'a string (why the check could not decide)', c.note);
    if (c.note !== undefined && typeof c.note !== 'string') bad(`${at}.note`, 'a string', c.note);
  });
  return checks as readonly CheckResult[];
}

export function checkReport(report: unknown): CheckReport {
  if (!isObject(report)) bad('report', 'a CheckReport (from checkHistory)', report);
  if (!VERDICTS.includes(report.verdict as string)) bad('report.verdict', `one of ${VERDICTS.join(', ')}`, report.verdict);
  if (report.storePolicy !== undefined && typeof report.storePolicy !== 'string') bad('report.storePolicy', 'a store policy', report.storePolicy);
  checkResults(report.checks, 'report.checks');
  if (!Array.isArray(report.findings)) bad('report.findings', 'an array of findings', report.findings);
  report.findings.forEach((f: unknown, i) => {
    const at = `report.findings[${i}]`;
    if (!isObject(f)) bad(at, 'a finding ({ check, property, message, events })', f);
    if (typeof f.property !== 'string') bad(`${at}.property`, 'a string', f.property);
    if (typeof f.message !== 'string') bad(`${at}.message`, 'a string', f.message);
    if (!Array.isArray(f.events) || !f.events.every((e) => Number.isInteger(e))) bad(`${at}.events`, 'an array of event indices', f.events);
    if (f.intervals !== undefined && (!Array.isArray(f.intervals) || !f.intervals.every(isObject))) bad(`${at}.intervals`, 'an array of hold spans', f.intervals);
  });
  if (!isObject(report.counts)) bad('report.counts', 'an object of counts', report.counts);
  // The page prints each count: a Symbol there was a TypeError from the template, an object its [object Object].
  // null: not counted, the check's budget ran out first (CheckCounts).
  for (const [key, n] of Object.entries(report.counts)) if (n !== null && (!Number.isSafeInteger(n) || (n as number) < 0)) bad(/^[A-Za-z]\w{0,39}$/.test(key) ? `report.counts.${key}` : 'a value of report.counts', 'a count (an integer >= 0, or null: not counted)', n);
  return report as unknown as CheckReport;
}
