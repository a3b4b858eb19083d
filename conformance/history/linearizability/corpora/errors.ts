/** A corpus file that does not parse: where, and why. */
export class CorpusParseError extends Error {
  override readonly name = 'CorpusParseError';
  constructor(
    /** File name or other label of the input. */
    readonly source: string,
    /** 1-based line of the input (0: not known). */
    readonly line: number,
    readonly reason: string,
  ) {
    super(`${source}${line > 0 ? `:${line}` : ''}: ${reason}`);
  }
}
