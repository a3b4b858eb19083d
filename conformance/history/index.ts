/**
 * Judging a recorded concurrent history (docs/histories.md): parse the JSON
 * lines, check them, write the HTML report. `lockcheck/history` in the package.
 */
export { HistoryFormatError, parseHistory, validateHistory } from './parse.ts';
export { DEFAULT_TIMEOUT_MS, checkHistory, overallVerdict } from './check.ts';
export type { CheckCounts, CheckId, CheckOptions, CheckProgress, CheckReport, CheckResult, DecidedCheckResult, Finding, HistoryPropertyId, HoldSpan, UndecidedCheckResult, Verdict } from './check.ts';
export { historyReportHtml, writeHistoryReport } from './report.ts';
export type * from './event.ts';
