/**
 * A word of a command lockcheck prints for the user to copy (a replay, a
 * check of a saved history, a stress run again): as it is when a shell reads
 * it so, else in single quotes. A path with a space split into two words,
 * and one with `;` or `$(…)` ran more than lockcheck.
 */
export function shellWord(s: string): string {
  return /^[\w./@%+=:,-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`;
}
