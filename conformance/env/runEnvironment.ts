import { EnvironmentError } from './faketime.ts';

/**
 * The servers failed one run, not the machine: a failover Sentinel would not
 * carry out, a topology that could not be reset. Thrown by a backend's start
 * or by a fault injector; the lockstep runner reports that run inconclusive
 * (judged neither way, with this message as a warning) and the check goes on
 * with the next run, which the backend gives a fresh environment.
 */
export class RunEnvironmentError extends EnvironmentError {}

/** `work`, any failure of which fails the run only (a restart that does not come back in its bound, say). */
export async function failsTheRun<T>(what: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (e) {
    if (e instanceof RunEnvironmentError) throw e;
    throw new RunEnvironmentError(`${what}: ${e instanceof Error ? e.message : String(e)}`);
  }
}
