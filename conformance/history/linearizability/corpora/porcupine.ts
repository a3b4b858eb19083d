import type { KvInput, KvOutput } from '../models/kv.ts';
import type { RegisterInput, RegisterOutput } from '../models/register.ts';
import type { Operation } from '../operation.ts';
import { type Edn, field, keywordName, readEdn } from './edn.ts';
import { CorpusParseError } from './errors.ts';

/**
 * Porcupine's test histories, with Porcupine's semantics: lines become call
 * and return events in file order and the line number is the time. Anything
 * left open at the end of the file is pending (may happen or not).
 */

const PREFIX = String.raw`^INFO\s+jepsen\.util\s+-\s+(\d+)\s+`;
const ETCD_LINES: readonly { readonly re: RegExp; readonly kind: EtcdLine }[] = [
  { re: new RegExp(`${PREFIX}:invoke\\s+:read\\s+nil$`), kind: 'invoke-read' },
  { re: new RegExp(`${PREFIX}:invoke\\s+:write\\s+(\\d+)$`), kind: 'invoke-write' },
  { re: new RegExp(`${PREFIX}:invoke\\s+:cas\\s+\\[(\\d+)\\s+(\\d+)\\]$`), kind: 'invoke-cas' },
  { re: new RegExp(`${PREFIX}:ok\\s+:read\\s+(nil|\\d+)$`), kind: 'ok-read' },
  { re: new RegExp(`${PREFIX}:ok\\s+:write\\s+(\\d+)$`), kind: 'ok-write' },
  { re: new RegExp(`${PREFIX}:(ok|fail)\\s+:cas\\s+\\[(\\d+)\\s+(\\d+)\\]$`), kind: 'done-cas' },
  { re: new RegExp(`${PREFIX}:fail\\s+:read\\s+:timed-out$`), kind: 'timeout-read' },
  // The process crashed: the operation stays pending (Jepsen gives the client a fresh process id).
  { re: new RegExp(`${PREFIX}:info\\s+:(write|cas|read)\\s+:timed-out$`), kind: 'info' },
];
type EtcdLine = 'invoke-read' | 'invoke-write' | 'invoke-cas' | 'ok-read' | 'ok-write' | 'done-cas' | 'timeout-read' | 'info';

interface Open<I> {
  readonly call: number;
  readonly input: I;
}

/**
 * `jepsen/etcd_NNN.log`: Jepsen etcd single-register runs, for `etcdRegister()`.
 * A `:fail :cas` is an observation (the compare failed); a read that timed out
 * returns at its line with no observed value.
 */
export function parseEtcdLog(text: string, source = 'etcd.log'): Operation<RegisterInput, RegisterOutput>[] {
  const open = new Map<number, Open<RegisterInput>>();
  const ops: Operation<RegisterInput, RegisterOutput>[] = [];
  const lines = text.split('\n');
  lines.forEach((raw, i) => {
    const line = raw.replace(/\r$/, '');
    if (line.trim() === '') return;
    const hit = ETCD_LINES.map(({ re, kind }) => ({ kind, m: re.exec(line) })).find((x) => x.m !== null);
    if (hit === undefined) throw new CorpusParseError(source, i + 1, `not a Jepsen etcd client line: ${JSON.stringify(line.slice(0, 80))}`);
    const m = hit.m!;
    const p = Number(m[1]);
    const invoke = (input: RegisterInput): void => {
      if (open.has(p)) throw new CorpusParseError(source, i + 1, `process ${p} invokes while an operation is open`);
      open.set(p, { call: i, input });
    };
    const complete = (f: RegisterInput['f'], output: RegisterOutput | undefined): void => {
      const o = open.get(p);
      if (o === undefined) throw new CorpusParseError(source, i + 1, `process ${p} completes with no open invoke`);
      if (o.input.f !== f) throw new CorpusParseError(source, i + 1, `process ${p} completes :${f} but invoked :${o.input.f}`);
      open.delete(p);
      ops.push({ process: p, call: o.call, return: i, input: o.input, ...(output === undefined ? {} : { output }) });
    };
    switch (hit.kind) {
      case 'invoke-read':
        return invoke({ f: 'read' });
      case 'invoke-write':
        return invoke({ f: 'write', value: Number(m[2]) });
      case 'invoke-cas':
        return invoke({ f: 'cas', from: Number(m[2]), to: Number(m[3]) });
      case 'ok-read':
        return complete('read', { value: m[2] === 'nil' ? null : Number(m[2]) });
      case 'ok-write':
        return complete('write', {});
      case 'done-cas':
        return complete('cas', { ok: m[2] === 'ok' });
      case 'timeout-read':
        return complete('read', undefined);
      case 'info':
        return; // stays open: pending at the end
    }
  });
  for (const [p, o] of open) ops.push({ process: p, call: o.call, input: o.input });
  return ops.sort((a, b) => a.call - b.call);
}

/** `kv/cNN-{ok,bad}.txt`: one EDN map per line (`:process :type :f :key :value`), for `kvStore()`. */
export function parseKvLog(text: string, source = 'kv.txt'): Operation<KvInput, KvOutput>[] {
  const open = new Map<number, Open<KvInput>>();
  const ops: Operation<KvInput, KvOutput>[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const fail = (reason: string): never => {
      throw new CorpusParseError(source, i + 1, reason);
    };
    const ev: Edn = readEdn(line, `${source}:${i + 1}`);
    const p = field(ev, 'process');
    if (typeof p !== 'number' || !Number.isInteger(p)) return fail(':process must be an integer');
    const type = keywordName(field(ev, 'type'));
    const f = keywordName(field(ev, 'f'));
    const key = field(ev, 'key');
    const value = field(ev, 'value');
    if (typeof key !== 'string') return fail(':key must be a string');
    if (f !== 'get' && f !== 'put' && f !== 'append') return fail(':f must be :get, :put or :append');
    if (type === 'invoke') {
      if (open.has(p)) fail(`process ${p} invokes while an operation is open`);
      if (f === 'get') open.set(p, { call: i, input: { f, key } });
      else if (typeof value !== 'string') fail(`:${f} needs a string :value`);
      else open.set(p, { call: i, input: { f, key, value } });
    } else if (type === 'ok') {
      const o = open.get(p);
      if (o === undefined) return fail(`process ${p} completes with no open invoke`);
      if (o.input.f !== f || o.input.key !== key) fail(`process ${p} completes :${f} ${key} but invoked :${o.input.f} ${o.input.key}`);
      open.delete(p);
      if (f === 'get' && typeof value !== 'string') fail(':get completes with a string :value');
      ops.push({ process: p, call: o.call, return: i, input: o.input, ...(f === 'get' ? { output: { value: value as string } } : {}) });
    } else fail(':type must be :invoke or :ok');
  });
  for (const [p, o] of open) ops.push({ process: p, call: o.call, input: o.input });
  return ops.sort((a, b) => a.call - b.call);
}
