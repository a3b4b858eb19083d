/**
 * What the wire client throws. A server's ErrorResponse keeps its SQLSTATE
 * (`code`) and fields, as node-postgres's DatabaseError does, so the locks
 * type it the same way (attempts.ts: refusal). The other two are the
 * connection's own failures: gone (socket closed, reset, destroyed) or a
 * reply the client cannot read.
 */
import { WireProtocolError } from '../../errors.ts';

/** The server sent something this client cannot read (an unknown message, a bad length, an unexpected reply): the connection is dropped. Declared with the public errors (impl/errors.ts, exported by lockcheck/lock and lockcheck/postgres). */
export { WireProtocolError };

/** An ErrorResponse (or a FATAL during start-up): the server said no, with a SQLSTATE. */
export class WireServerError extends Error {
  override readonly name = 'WireServerError';
  constructor(
    /** SQLSTATE, five characters. */
    readonly code: string,
    readonly severity: string,
    message: string,
    /** Every field of the ErrorResponse by its one-letter type (D detail, H hint, ...). */
    readonly fields: Readonly<Record<string, string>>,
  ) {
    super(message);
  }
}

/** The connection is gone (or was never made): its outcome for any call in flight is unknown. */
export class WireConnectionError extends Error {
  override readonly name = 'WireConnectionError';
}


/** Fields of an ErrorResponse or NoticeResponse body: (type byte, C string)*, then a zero byte. */
export function readFields(buf: Buffer, start: number, end: number): Record<string, string> {
  const fields: Record<string, string> = {};
  let i = start;
  while (i < end && buf[i] !== 0) {
    const type = String.fromCharCode(buf[i]!);
    const zero = buf.indexOf(0, i + 1);
    if (zero < 0 || zero >= end) throw new WireProtocolError('an error field without its terminating zero');
    fields[type] = buf.toString('utf8', i + 1, zero);
    i = zero + 1;
  }
  if (i !== end - 1) throw new WireProtocolError('an error or notice without its final zero, or bytes after it');
  return fields;
}

export function serverError(fields: Readonly<Record<string, string>>): WireServerError {
  return new WireServerError(fields.C ?? '', fields.V ?? fields.S ?? 'ERROR', fields.M ?? 'error without a message', fields);
}
