import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { checkLinearizability, type CheckOptions, type LinearizabilityResult } from '../check.ts';
import { kvStore, kvStoreUnpartitioned } from '../models/kv.ts';
import { multiRegister } from '../models/multiRegister.ts';
import { mutex } from '../models/mutex.ts';
import { casRegister, etcdRegister, register } from '../models/register.ts';
import { CorpusParseError } from './errors.ts';
import { parseKnossosHistory, toMultiRegisterOperations, toMutexOperations, toRegisterOperations } from './knossos.ts';
import { parseEtcdLog, parseKvLog } from './porcupine.ts';

/**
 * The shared test corpora (`../shared/corpora/{porcupine,knossos}`): their
 * `expected.tsv` rows, and for each row a parsed history bound to its model,
 * ready to check (so that timing can leave parsing out).
 */
export type Corpus = 'porcupine' | 'knossos';

export interface CorpusCase {
  readonly corpus: Corpus;
  /** Path under the corpus folder. */
  readonly file: string;
  /** The model as `expected.tsv` names it. */
  readonly model: string;
  /** undefined: the corpus asserts no verdict (e.g. the empty etcd_095). */
  readonly expected: boolean | undefined;
  readonly notes: string;
}

export interface PreparedCase extends CorpusCase {
  readonly operations: number;
  /** Checks the parsed history (a fresh model each time). */
  check(options?: CheckOptions): LinearizabilityResult;
}

/**
 * Rows of `expected.tsv`. Knossos rows whose verdict column is empty are
 * report-only upstream; its README records an independent re-check that
 * found them invalid, which is what is expected here.
 */
export function parseExpectedTsv(corpus: Corpus, text: string, source = `${corpus}/expected.tsv`): CorpusCase[] {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const header = lines.shift();
  if (header === undefined || !header.startsWith('file\tmodel\texpected_linearizable')) throw new CorpusParseError(source, 1, 'missing header file/model/expected_linearizable');
  return lines.map((line, i) => {
    const [file, model, expected, notes = ''] = line.split('\t');
    if (file === undefined || model === undefined || expected === undefined) throw new CorpusParseError(source, i + 2, 'needs at least 3 tab-separated columns');
    let verdict: boolean | undefined;
    if (expected === 'true') verdict = true;
    else if (expected === 'false') verdict = false;
    else if (expected === '') verdict = corpus === 'knossos' && /re-check: invalid|only rendered|report_test/.test(notes) ? false : undefined;
    else throw new CorpusParseError(source, i + 2, `expected_linearizable must be true, false or empty, got '${expected}'`);
    return { corpus, file, model, expected: verdict, notes };
  });
}

/** Binds a row's history text to its model. */
export function prepareCase(c: CorpusCase, text: string): PreparedCase {
  const source = `${c.corpus}/${c.file}`;
  const bind = <T>(operations: readonly T[], check: (ops: readonly T[], options?: CheckOptions) => LinearizabilityResult): PreparedCase => ({
    ...c,
    operations: operations.length,
    check: (options) => check(operations, options),
  });
  switch (c.model) {
    case 'etcd':
    case 'none':
      return bind(parseEtcdLog(text, source), (ops, o) => checkLinearizability(etcdRegister(), ops, o));
    case 'kv-partitioned':
      return bind(parseKvLog(text, source), (ops, o) => checkLinearizability(kvStore(), ops, o));
    case 'kv-no-partition':
      return bind(parseKvLog(text, source), (ops, o) => checkLinearizability(kvStoreUnpartitioned(), ops, o));
    case '(cas-register 0)':
      return bind(toRegisterOperations(parseKnossosHistory(text, source), source), (ops, o) => checkLinearizability(casRegister(0), ops, o));
    case '(cas-register nil)':
      return bind(toRegisterOperations(parseKnossosHistory(text, source), source), (ops, o) => checkLinearizability(casRegister(null), ops, o));
    case '(register 0)':
      return bind(toRegisterOperations(parseKnossosHistory(text, source), source), (ops, o) => checkLinearizability(register(0), ops, o));
    case '(multi-register {:x 0 :y 0})':
      return bind(toMultiRegisterOperations(parseKnossosHistory(text, source), source), (ops, o) =>
        checkLinearizability(multiRegister({ x: 0, y: 0 }), ops, o),
      );
    case '(mutex)':
      return bind(toMutexOperations(parseKnossosHistory(text, source), source), (ops, o) => checkLinearizability(mutex(), ops, o));
    default:
      throw new CorpusParseError(`${c.corpus}/expected.tsv`, 0, `unknown model '${c.model}' for ${c.file}`);
  }
}

/** Reads both corpora under `root` (the folder holding `porcupine/` and `knossos/`). */
export function loadCorpora(root: string): PreparedCase[] {
  const out: PreparedCase[] = [];
  for (const corpus of ['porcupine', 'knossos'] as const) {
    const dir = join(root, corpus);
    for (const c of parseExpectedTsv(corpus, readFileSync(join(dir, 'expected.tsv'), 'utf8'))) out.push(prepareCase(c, readFileSync(join(dir, c.file), 'utf8')));
  }
  return out;
}

/** The workplace's shared folder: where the corpora are when a clone sits away from it (a CI clone in a temp dir). */
const WORKPLACE_CORPORA = '/work/shared/corpora';

/**
 * Where the corpora are: `$LOCKCHECK_CORPORA`, else the nearest `shared/corpora`
 * beside `from` or one of its ancestors (the issue's `../shared/corpora`),
 * else the workplace's shared folder.
 */
export function findCorpora(from: string): string | undefined {
  const env = process.env.LOCKCHECK_CORPORA;
  if (env !== undefined && env !== '') return env;
  const found = (candidate: string): boolean => existsSync(join(candidate, 'porcupine', 'expected.tsv'));
  for (let dir = resolve(from); ; dir = dirname(dir)) {
    const candidate = join(dir, 'shared', 'corpora');
    if (found(candidate)) return candidate;
    if (dirname(dir) === dir) return found(WORKPLACE_CORPORA) ? WORKPLACE_CORPORA : undefined;
  }
}
