import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { onExitKill } from '../env/processes.ts';
import type { AdapterRef } from './adapterRef.ts';
import type { ClientConfig, FromClient, ToClient } from './protocol.ts';

const WORKER = fileURLToPath(new URL('./worker.mjs', import.meta.url));
/** Bound on a client process's start-up (loading TypeScript through tsx takes a second or two on a loaded machine). */
const READY_TIMEOUT_MS = 60_000;
/** Bound on client processes exiting once let go. */
const STOP_TIMEOUT_MS = 20_000;
const STDERR_TAIL = 4096;

const live = new Set<ChildProcess>();

/**
 * The client processes of a stress run: real OS processes, so that a pause
 * (SIGSTOP) stops everything in them, timers included. All of them are
 * SIGKILLed at exit or on SIGINT/SIGTERM should the runner die first.
 */
export class ClientFleet {
  readonly #children: ChildProcess[];
  readonly #paused: boolean[];
  readonly #stderr: string[];
  readonly #exited: Promise<void>[];

  private constructor(children: ChildProcess[], stderr: string[], exited: Promise<void>[]) {
    this.#children = children;
    this.#paused = children.map(() => false);
    this.#stderr = stderr;
    this.#exited = exited;
  }

  /** Forks `count` client processes and waits until each has loaded (bounded). */
  static async start(count: number, onMessage: (client: number, m: FromClient) => void): Promise<ClientFleet> {
    onExitKill(killAllSync);
    const children: ChildProcess[] = [];
    const stderr: string[] = [];
    const exited: Promise<void>[] = [];
    const ready: Promise<void>[] = [];
    for (let i = 0; i < count; i++) {
      const child = fork(WORKER, [], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], serialization: 'json' });
      live.add(child);
      children.push(child);
      stderr.push('');
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr[i] = (stderr[i]! + chunk.toString('utf8')).slice(-STDERR_TAIL);
      });
      exited.push(new Promise((resolve) => child.once('exit', () => {
        live.delete(child);
        resolve();
      })));
      ready.push(
        new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`client process ${i} did not start within ${READY_TIMEOUT_MS} ms\n${stderr[i]}`)), READY_TIMEOUT_MS);
          child.once('exit', (code, signal) => {
            clearTimeout(timer);
            reject(new Error(`client process ${i} exited during start-up (${signal ?? code})\n${stderr[i]}`));
          });
          let started = false;
          child.on('message', (raw: unknown) => {
            const m = raw as FromClient;
            if (m.kind === 'ready') {
              clearTimeout(timer);
              started = true;
              resolve();
            } else onMessage(i, m);
          });
          // A client process that dies in a run (a library that crashes it on an unhandled 'error') is that client's error.
          child.once('exit', (code, signal) => {
            if (started) onMessage(i, { kind: 'exited', message: `its process exited (${signal ?? `code ${code}`}): ${lastLine(stderr[i]!)}` });
          });
        }),
      );
    }
    const fleet = new ClientFleet(children, stderr, exited);
    try {
      await Promise.all(ready);
    } catch (e) {
      await fleet.kill();
      throw e;
    }
    return fleet;
  }

  get size(): number {
    return this.#children.length;
  }

  /** The client's process is still there (it may have died in an earlier run). */
  alive(client: number): boolean {
    const child = this.#children[client]!;
    return child.exitCode === null && child.signalCode === null && child.connected;
  }

  /** Asks the client to load an adapter before a run (it answers `prepared`). */
  prepare(client: number, adapter: AdapterRef): void {
    this.#send(client, { kind: 'prepare', adapter });
  }

  start(client: number, config: ClientConfig): void {
    this.#send(client, { kind: 'start', config });
  }

  go(client: number): void {
    this.#send(client, { kind: 'go' });
  }

  /** SIGSTOP: the client process stops, timers and all. */
  pause(client: number): void {
    this.#signal(client, 'SIGSTOP');
    this.#paused[client] = true;
  }

  resume(client: number): void {
    this.#signal(client, 'SIGCONT');
    this.#paused[client] = false;
  }

  paused(client: number): boolean {
    return this.#paused[client]!;
  }

  stderrOf(client: number): string {
    return this.#stderr[client]!;
  }

  /** Asks every client (resumed first) to finish its cycle and report `done`. */
  stopRuns(): void {
    for (let c = 0; c < this.size; c++) {
      if (this.#paused[c]) this.resume(c);
      this.#send(c, { kind: 'stop' });
    }
  }

  /** Lets every client go (they exit when the IPC channel closes), waits (bounded), then kills what is left. */
  async close(): Promise<void> {
    for (let c = 0; c < this.size; c++) {
      if (this.#paused[c]) this.resume(c);
      const child = this.#children[c]!;
      if (child.connected) child.disconnect();
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(this.#exited), new Promise((resolve) => (timer = setTimeout(resolve, STOP_TIMEOUT_MS)))]);
    clearTimeout(timer);
    await this.kill();
  }

  /** SIGCONT and SIGKILL every client still running; waits for them to exit. */
  async kill(): Promise<void> {
    for (const child of this.#children) killChild(child);
    await Promise.all(this.#exited);
  }

  #send(client: number, m: ToClient): void {
    const child = this.#children[client]!;
    if (child.connected) child.send(m, (error) => void error); // a client that just exited cannot be told
  }

  #signal(client: number, signal: NodeJS.Signals): void {
    const child = this.#children[client]!;
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  }
}

function lastLine(text: string): string {
  const lines = text.trim().split('\n').filter((l) => l.trim() !== '' && !/^\s+at /.test(l));
  // Node prints the error's own line (`Error: …`, `error: …`) between the throwing source line and the stack.
  return (lines.find((l) => /^[\w.]*(Error|error)( \[\w+\])?: /.test(l.trim())) ?? lines[lines.length - 1] ?? 'no message').trim().slice(0, 300);
}

function killChild(child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  try {
    child.kill('SIGCONT');
    child.kill('SIGKILL');
  } catch {
    // already gone
  }
}

function killAllSync(): void {
  for (const child of live) killChild(child);
}
