import type pg from 'pg';

/**
 * SQLSTATEs the server sends only as it ends the session: a terminated backend or a shutdown
 * (57P01), a crash (57P02), a server not accepting connections (57P03), an idle session's or
 * transaction's timeout (57P05, 25P03, 25P04). Checked beside the severity, which a translated
 * lc_messages renders in its own language.
 */
const SESSION_ENDING_STATES = new Set(['57P01', '57P02', '57P03', '57P05', '25P03', '25P04']);

/** An error message with which the server ends the session (FATAL or PANIC): its locks are freed, its transaction is gone, the close follows. */
export function endsSession(message: unknown): boolean {
  const { severity, code } = (message ?? {}) as { severity?: unknown; code?: unknown };
  return severity === 'FATAL' || severity === 'PANIC' || (typeof code === 'string' && SESSION_ENDING_STATES.has(code));
}

/**
 * Runs `lost` as node-postgres reads a message that ends the session: a FATAL error failing a statement in flight
 * reaches its caller a turn before the socket's close ('end'), so the session's leases are lost before that caller
 * learns of it from its own statement (the wire client does the same in its reader).
 */
export function loseOnSessionEnd(client: pg.Client, lost: () => void): void {
  (client as unknown as { connection: NodeJS.EventEmitter }).connection.on('errorMessage', (message: unknown) => {
    if (endsSession(message)) lost();
  });
}
