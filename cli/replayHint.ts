import { isBuiltIn, type ServerChoice } from './backends.ts';
import { shellWord } from './shellWord.ts';

/**
 * The command that replays a saved counterexample, as `lockcheck run` prints
 * it: ready to copy. A counterexample of an adapter module needs its
 * `--backend` again (a file never names code to load), and one found on the
 * user's servers needs them again (the file keeps no URLs: they may hold
 * passwords), so the hint names both rather than a command that is refused.
 */
export function replayHint(file: string, backend: string, servers: ServerChoice = {}): string {
  const command = ['lockcheck replay', shellWord(file), ...(isBuiltIn(backend) ? [] : ['--backend', shellWord(backend)])].join(' ');
  const again = [servers.redis !== undefined ? '--redis' : null, servers.pg !== undefined ? '--pg' : null].filter((x) => x !== null);
  return again.length === 0 ? command : `${command}, with the same ${again.join(' and ')}`;
}
