/**
 * Values written into the servers' config files, escaped as each file's
 * reader reads them. A path or password is text the caller chose (a
 * parentDir, TMPDIR, RedisServer's `password`): written raw, a backslash, a
 * quote, a space or a line break in it changed what the server read (a
 * ZooKeeper dataDir outside the private directory, a redis.conf line of the
 * caller's making, a server that would not start).
 */

/**
 * A value of a Java properties file (ZooKeeper's zoo.cfg, read by
 * Properties.load as ISO 8859-1): every character outside printable ASCII,
 * the space and the backslash as a \uXXXX escape, so the JVM reads back
 * exactly `text`.
 */
export function javaPropertiesValue(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    out += code > 0x20 && code < 0x7f && code !== 0x5c ? text[i] : `\\u${code.toString(16).padStart(4, '0')}`;
  }
  return out;
}

/**
 * One argument of a redis.conf directive, double-quoted as Redis's
 * sdssplitargs reads it: printable ASCII as it is (but `"` and `\`), every
 * other byte of its UTF-8 as \xHH, so the server takes exactly `text` as one
 * argument.
 */
export function redisConfigArgument(text: string): string {
  let out = '"';
  for (const byte of Buffer.from(text, 'utf8')) {
    out += byte >= 0x20 && byte < 0x7f && byte !== 0x22 && byte !== 0x5c ? String.fromCharCode(byte) : `\\x${byte.toString(16).padStart(2, '0')}`;
  }
  return `${out}"`;
}

/** One item of a PostgreSQL list setting (unix_socket_directories), double-quoted as SplitDirectoriesString reads it: a comma or space in it stays in it. */
export function postgresListItem(text: string): string {
  return `"${text.replaceAll('"', '""')}"`;
}
