import { EnvironmentError } from './faketime.ts';

/**
 * A server's start() that stop() (or a stopAll, or the exit handlers) ended
 * before it was up: nothing of it is left running, and what failed inside
 * start() afterwards (a killed initdb, a removed directory) is the stop's
 * doing, kept as `cause`, not an environment problem to report as one.
 */
export class StoppedWhileStarting extends EnvironmentError {
  readonly stoppedWhileStarting = true;
  constructor(message: string, options?: { readonly cause?: unknown }) {
    super(message);
    // Read as any caller may pass it (the kit exports the class): a junk options value carries no cause, and throws nothing.
    const cause: unknown = typeof options === 'object' && options !== null ? (options as { readonly cause?: unknown }).cause : undefined;
    if (cause !== undefined) this.cause = cause;
  }
}
