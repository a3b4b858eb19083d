import type { History, HistoryEvent } from './event.ts';

/** One event as its JSONL line (no newline): what a recorder appends. */
export function formatEvent(event: HistoryEvent): string {
  return JSON.stringify(event);
}

/** A whole history as JSONL, one event per line, ending with a newline. */
export function formatHistory(history: History): string {
  return history.map((e) => `${formatEvent(e)}\n`).join('');
}
