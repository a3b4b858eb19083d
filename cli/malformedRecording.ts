import type { HistoryFormatError } from '../conformance/history/parse.ts';

/**
 * A run's history that the format refuses: a client recorded what `lockcheck
 * check` would reject (an adapter's lease with an empty owner, a negative
 * token, a deadline that is not a number...). It is not judged: the checkers
 * assume the format, and a verdict on it would not be the one `lockcheck
 * check` gives on the file written.
 */
export class MalformedRecordingError extends Error {
  override readonly name = 'MalformedRecordingError';
  constructor(
    readonly problem: HistoryFormatError,
    readonly historyFile: string | undefined,
  ) {
    super(
      `the recorded history is not valid, so it is not judged: ${problem.message}${historyFile === undefined ? '' : ` (in ${historyFile})`}; a client recorded what the history format does not allow: an adapter's lease (owner, token, validUntilMs)? (the format: docs/histories.md)`,
    );
  }
}
