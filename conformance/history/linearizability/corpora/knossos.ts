import type { RegisterValue } from '../model.ts';
import type { MicroOp, MultiRegisterInput, MultiRegisterOutput } from '../models/multiRegister.ts';
import type { MutexInput } from '../models/mutex.ts';
import type { RegisterInput, RegisterOutput } from '../models/register.ts';
import type { Operation } from '../operation.ts';
import { type Edn, field, Keyword, keywordName, readEdn, showEdn } from './edn.ts';
import { CorpusParseError } from './errors.ts';

/**
 * Knossos histories (EDN, one collection of operation maps in real-time
 * order) with Knossos's semantics: a completion pairs with its process's open
 * invoke; `:ok` replaces the invoke's value; `:fail` drops the operation (it
 * did not happen); `:info`, or no completion at all, leaves it pending (it
 * may happen at any time after its invoke, or never); events of non-integer
 * processes (the nemesis) are ignored. Times are positions in the file.
 */
export interface KnossosOperation {
  readonly process: number;
  readonly f: string;
  /** Position of the invoke in the file (0-based, events only). */
  readonly call: number;
  /** Position of the `:ok`; undefined when pending. */
  readonly return?: number;
  readonly invokeValue: Edn;
  /** The `:ok`'s value; undefined when pending. */
  readonly okValue?: Edn;
}

export function parseKnossosHistory(text: string, source = 'knossos.edn'): KnossosOperation[] {
  const root = readEdn(text, source);
  if (!Array.isArray(root)) throw new CorpusParseError(source, 0, 'a Knossos history is one vector or list of operation maps');
  const events = root as readonly Edn[];
  const open = new Map<number, { f: string; call: number; value: Edn }>();
  const done: KnossosOperation[] = [];
  const fail = (i: number, reason: string): never => {
    throw new CorpusParseError(source, 0, `event ${i}: ${reason}`);
  };
  events.forEach((ev, i) => {
    if (!(ev instanceof Map)) fail(i, 'not a map');
    const process = field(ev, 'process');
    if (process instanceof Keyword) return; // the nemesis
    if (typeof process !== 'number' || !Number.isSafeInteger(process) || process < 0) fail(i, `:process must be a non-negative integer or a keyword, got ${showEdn(process)}`);
    const p = process as number;
    const type = keywordName(field(ev, 'type'));
    const f = keywordName(field(ev, 'f'));
    if (f === undefined) fail(i, ':f must be a keyword');
    const value = field(ev, 'value') ?? null;
    const pending = open.get(p);
    switch (type) {
      case 'invoke':
        if (pending !== undefined) fail(i, `process ${p} invokes while its operation at event ${pending.call} is open`);
        open.set(p, { f: f!, call: i, value });
        return;
      case 'ok':
        if (pending === undefined) return fail(i, `process ${p} completes with no open invoke`);
        if (pending.f !== f) fail(i, `process ${p} completes :${f} but invoked :${pending.f}`);
        open.delete(p);
        done.push({ process: p, f: f!, call: pending.call, return: i, invokeValue: pending.value, okValue: value });
        return;
      case 'fail':
        if (pending === undefined) return fail(i, `process ${p} fails with no open invoke`);
        open.delete(p);
        return;
      case 'info':
        // An :info with no open invoke is a nemesis-style note: ignored.
        if (pending === undefined) return;
        open.delete(p);
        done.push({ process: p, f: pending.f, call: pending.call, invokeValue: pending.value });
        return;
      default:
        fail(i, `:type must be :invoke, :ok, :fail or :info, got ${showEdn(field(ev, 'type'))}`);
    }
  });
  for (const [p, o] of open) done.push({ process: p, f: o.f, call: o.call, invokeValue: o.value });
  return done.sort((a, b) => a.call - b.call);
}

function registerValue(v: Edn | undefined, where: string, source: string): RegisterValue {
  if (v === null || v === undefined || typeof v === 'number' || typeof v === 'string' || typeof v === 'bigint' || typeof v === 'boolean') return v ?? null;
  if (v instanceof Keyword) return `:${v.name}`;
  throw new CorpusParseError(source, 0, `${where}: not a register value: ${showEdn(v)}`);
}

const at = (o: KnossosOperation): string => `operation of process ${o.process} invoked at event ${o.call}`;

/** Operations of `(cas-register)` / `(register)`: `:read`, `:write v`, `:cas [from to]`. */
export function toRegisterOperations(ops: readonly KnossosOperation[], source = 'knossos.edn'): Operation<RegisterInput, RegisterOutput>[] {
  return ops.map((o) => {
    const base = { process: o.process, call: o.call, ...(o.return === undefined ? {} : { return: o.return }) };
    switch (o.f) {
      case 'read':
        return { ...base, input: { f: 'read' }, ...(o.return === undefined ? {} : { output: { value: registerValue(o.okValue, at(o), source) } }) };
      case 'write':
        return { ...base, input: { f: 'write', value: registerValue(o.okValue ?? o.invokeValue, at(o), source) } };
      case 'cas': {
        const v = o.okValue ?? o.invokeValue;
        if (!Array.isArray(v) || v.length !== 2) throw new CorpusParseError(source, 0, `${at(o)}: :cas needs [from to]`);
        const [from, to] = v as readonly Edn[];
        return {
          ...base,
          input: { f: 'cas', from: registerValue(from, at(o), source), to: registerValue(to, at(o), source) },
          ...(o.return === undefined ? {} : { output: { ok: true } }),
        };
      }
      default:
        throw new CorpusParseError(source, 0, `${at(o)}: a register has no :${o.f}`);
    }
  });
}

/** Operations of `(multi-register)`: `:txn [[:read k v] [:write k v] ...]`. */
export function toMultiRegisterOperations(ops: readonly KnossosOperation[], source = 'knossos.edn'): Operation<MultiRegisterInput, MultiRegisterOutput>[] {
  const micro = (v: Edn | undefined, o: KnossosOperation): MicroOp[] => {
    if (!Array.isArray(v)) throw new CorpusParseError(source, 0, `${at(o)}: :txn needs a vector of micro-operations`);
    return (v as readonly Edn[]).map((m) => {
      if (!Array.isArray(m) || m.length !== 3) throw new CorpusParseError(source, 0, `${at(o)}: a micro-operation is [f k v]`);
      const [f, k, x] = m as readonly Edn[];
      const fn = keywordName(f);
      if (fn !== 'read' && fn !== 'write') throw new CorpusParseError(source, 0, `${at(o)}: micro-operation :${String(fn)} is not :read or :write`);
      const key = k instanceof Keyword ? k.name : typeof k === 'string' ? k : undefined;
      if (key === undefined) throw new CorpusParseError(source, 0, `${at(o)}: a micro-operation's key must be a keyword or string`);
      return { f: fn, key, value: registerValue(x, at(o), source) };
    });
  };
  return ops.map((o) => {
    if (o.f !== 'txn') throw new CorpusParseError(source, 0, `${at(o)}: a multi-register has no :${o.f}`);
    return {
      process: o.process,
      call: o.call,
      ...(o.return === undefined ? {} : { return: o.return, output: micro(o.okValue, o) }),
      input: micro(o.invokeValue, o),
    };
  });
}

/** Operations of `(mutex)`: `:acquire`, `:release`. */
export function toMutexOperations(ops: readonly KnossosOperation[], source = 'knossos.edn'): Operation<MutexInput, unknown>[] {
  return ops.map((o) => {
    if (o.f !== 'acquire' && o.f !== 'release') throw new CorpusParseError(source, 0, `${at(o)}: a mutex has no :${o.f}`);
    return { process: o.process, call: o.call, ...(o.return === undefined ? {} : { return: o.return }), input: { f: o.f } };
  });
}
