import type { BackendUnderTest } from './adapter.ts';
import { isInvalidInput } from './contract.ts';
import { describeThrown } from './thrown.ts';
import { AdapterApiError, checkBackendApi } from './backendApi.ts';
import { terminalSafe } from './env/redact.ts';

/**
 * A configuration a backend must refuse. `attempt` builds the backend so
 * configured (and, if that is accepted, uses it once and closes it); it must
 * reject with InvalidInputError before anything is held.
 */
export interface Misconfiguration {
  /** What is wrong, for the report: "driftFactor 1". */
  readonly what: string;
  /** The option the error message must name: a clear error says what to fix. */
  readonly names: string;
  /** Builds the backend so configured (and if that is accepted, uses it once and closes it); must reject with InvalidInputError naming `names`. */
  readonly attempt: () => Promise<void>;
}

/**
 * Tries each of the backend's misconfigurations (spec: bad input gets a clear
 * typed error). Returns one line per configuration that was accepted, or
 * refused otherwise than with an InvalidInputError of code invalid-config
 * whose message names the option. The lines are redacted, their control
 * characters shown (terminalSafe).
 */
export async function checkMisconfigurations(backend: BackendUnderTest): Promise<string[]> {
  checkBackendApi(backend, 'checkMisconfigurations: the backend');
  const list: unknown = backend.misconfigurations ?? [];
  if (!Array.isArray(list)) throw new AdapterApiError(`${backend.name}: misconfigurations must be an array of { what, names, attempt }`);
  list.forEach((m: unknown, i) => {
    const c = m as Partial<Record<keyof Misconfiguration, unknown>> | null;
    if (typeof c !== 'object' || c === null || typeof c.what !== 'string' || typeof c.names !== 'string' || typeof c.attempt !== 'function') {
      throw new AdapterApiError(`${backend.name}: misconfigurations[${i}] must be { what: string, names: string, attempt: () => Promise<void> }`);
    }
  });
  const problems: string[] = [];
  for (const m of list as readonly Misconfiguration[]) {
    // A refusal may throw anything, null included, and synchronously: whether it threw is kept apart from what.
    const attempt = await (async () => m.attempt())().then(
      () => ({ refused: false as const }),
      (e: unknown) => ({ refused: true as const, error: e }),
    );
    if (!attempt.refused) {
      problems.push(`${backend.name}: ${m.what} was accepted`);
      continue;
    }
    const error = attempt.error;
    if (!isInvalidInput(error)) problems.push(`${backend.name}: ${m.what} was refused with ${describeThrown(error)}, not with InvalidInputError`);
    else if ((error as { code?: unknown }).code !== 'invalid-config') problems.push(`${backend.name}: ${m.what} was refused with code ${String((error as { code?: unknown }).code)}, not invalid-config`);
    else if (!(error as Error).message.includes(m.names)) problems.push(`${backend.name}: ${m.what} was refused with "${(error as Error).message}", which does not name ${m.names}`);
  }
  // Text for a test runner's output, where no filter runs: a refusal may quote the URL with its password.
  return problems.map(terminalSafe);
}
