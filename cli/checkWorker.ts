import { parentPort, workerData } from 'node:worker_threads';
import { checkHistory, hasClientOperations, type CheckOptions, type CheckProgress, type CheckReport } from '../conformance/history/check.ts';
import { decodeHistory, parseHistory } from '../conformance/history/parse.ts';
import { stopRead } from './stopSignals.ts';

/**
 * lockcheck check's worker thread: decodes, parses and judges the history, so that the main thread stays free to
 * hear Ctrl-C and set the shared stop flag (a search on the main thread would hold the signal until it ended).
 */
export interface CheckTask {
  readonly bytes: Uint8Array;
  readonly options: Omit<CheckOptions, 'onProgress' | 'stop'>;
  /** A StopFlag's buffer: set once the check is to stop (CheckOptions.stop). */
  readonly stop: SharedArrayBuffer;
}

export type CheckMessage =
  | { readonly kind: 'progress'; readonly progress: CheckProgress }
  | { readonly kind: 'invalid'; readonly message: string }
  | { readonly kind: 'empty'; readonly events: number }
  | { readonly kind: 'report'; readonly report: CheckReport };

const task = workerData as CheckTask;
const post = (m: CheckMessage): void => parentPort!.postMessage(m);
const stopped = stopRead(task.stop);
const text = decodeHistory(task.bytes);
const history = text instanceof Error ? text : parseHistory(text);
if (history instanceof Error) post({ kind: 'invalid', message: history.message });
else if (!hasClientOperations(history)) post({ kind: 'empty', events: history.length });
else {
  const report = checkHistory(history, { ...task.options, onProgress: (progress) => post({ kind: 'progress', progress }), stop: stopped });
  post({ kind: 'report', report });
}
