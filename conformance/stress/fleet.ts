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
 * SIGKILLed at exit or on SIGINT/SIGTERM should the runner die first. A
 * process that dies in a run (a library that crashes it on an unhandled
 * 'error') is reported to that run, and replaceDead() forks a fresh one in
 * its place before the next. Each leads a process group of its own, so that
 * a pause stops, and its end ends, whatever an adapter started in it too
 * (a `sleep 600` its connect spawned outlived the run).
 */
export class ClientFleet {
  readonly #children: ChildProcess[] = [];
  readonly #paused: boolean[] = [];
  readonly #stderr: string[] = [];
  readonly #exited: Promise<void>[] = [];
  readonly #onMessage: (client: number, m: FromClient) => void;

  private constructor(onMessage: (client: number, m: FromClient) => void) {
    this.#onMessage = onMessage;
  }

  /** Forks `count` client processes and waits until each has loaded (bounded). */
  static async start(count: number, onMessage: (client: number, m: FromClient) => void): Promise<ClientFleet> {
    onExitKill(killAllSync);
    const fleet = new ClientFleet(onMessage);
    try {
      await Promise.all(Array.from({ length: count }, (_v, i) => fleet.#spawn(i)));
    } catch (e) {
      await fleet.kill();
      throw e;
    }
    return fleet;
  }

  /**
   * Forks a fresh process in place of each one that is gone (it died in an
   * earlier run), waits until each has loaded (bounded), and returns the
   * clients it replaced, so that the next run measures all of them again.
   */
  async replaceDead(): Promise<number[]> {
    const dead = this.#children.map((_c, i) => i).filter((i) => !this.alive(i));
    await Promise.all(dead.map((i) => this.#spawn(i)));
    return dead;
  }

  /** Forks client `i`'s process (in a fresh slot, or in place of a dead one) and waits until it has loaded (bounded). */
  #spawn(i: number): Promise<void> {
    const child = fork(WORKER, [], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], serialization: 'json', detached: true });
    live.add(child);
    this.#children[i] = child;
    this.#paused[i] = false;
    this.#stderr[i] = '';
    const stderr = this.#stderr;
    child.stderr?.on('data', (chunk: Buffer) => {
      if (this.#children[i] === child) stderr[i] = (stderr[i]! + chunk.toString('utf8')).slice(-STDERR_TAIL);
    });
    this.#exited[i] = new Promise((resolve) =>
      child.once('exit', () => {
        live.delete(child);
        // What the process started and left behind goes with it (its group outlives it while any member does).
        signalGroup(child, 'SIGKILL');
        resolve();
      }),
    );
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`client process ${i} did not start within ${READY_TIMEOUT_MS} ms\n${stderr[i]}`)), READY_TIMEOUT_MS);
      let started = false;
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        // A client process that dies in a run is that client's error; one that dies starting fails the start.
        if (started) this.#onMessage(i, { kind: 'exited', message: `its process exited (${signal ?? `code ${code}`}): ${lastLine(stderr[i]!)}` });
        else reject(new Error(`client process ${i} exited during start-up (${signal ?? code})\n${stderr[i]}`));
      });
      child.on('message', (raw: unknown) => {
        const m = raw as FromClient;
        if (m.kind === 'ready') {
          clearTimeout(timer);
          started = true;
          resolve();
        } else this.#onMessage(i, m);
      });
    });
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

  /** SIGCONT and SIGKILL these clients' processes; waits for them to exit (replaceDead forks fresh ones for the next run). */
  async killClients(clients: readonly number[]): Promise<void> {
    for (const c of clients) {
      this.#paused[c] = false;
      killChild(this.#children[c]!);
    }
    await Promise.all(clients.map((c) => this.#exited[c]!));
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
    if (child.exitCode === null && child.signalCode === null) signalGroup(child, signal);
  }
}

/** The line of a process's stderr that says why it died (the error's own line, not its stack). */
export function lastLine(text: string): string {
  const lines = text.trim().split('\n').filter((l) => l.trim() !== '' && !/^\s+at /.test(l));
  // Node prints the error's own line (`Error: …`, `error: …`) between the throwing source line and the stack.
  return (lines.find((l) => /^[\w.]*(Error|error)( \[\w+\])?: /.test(l.trim())) ?? lines[lines.length - 1] ?? 'no message').trim().slice(0, 300);
}

function killChild(child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  signalGroup(child, 'SIGCONT');
  signalGroup(child, 'SIGKILL');
}

/** `signal` to the child's process group (it leads one: forked detached), or to the child alone should that fail. */
function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      // No group (left already): the child itself, if it is still there.
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    } catch {
      // already gone
    }
  }
}

function killAllSync(): void {
  for (const child of live) killChild(child);
}
