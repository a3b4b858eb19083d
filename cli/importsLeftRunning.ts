/** Adapter modules whose top-level code was given up on while still running: nothing can stop it, so the process ends without waiting on it. */
let importsLeftRunning = 0;

/** An adapter module's import was given up on (backends.ts, LOCKCHECK_IMPORT_LIMIT_MS). */
export function markImportLeftRunning(): void {
  importsLeftRunning++;
}

export const importLeftRunning = (): boolean => importsLeftRunning > 0;
