import { posix } from 'node:path';

/**
 * The relative links of a markdown page and the anchors its headings make, as GitHub (and npm's page, and most
 * viewers) render them: enough for the docs of this repository, read as text (no markdown parser among the
 * dependencies). Code is not markup: fenced blocks and inline code spans hold no links and make no headings. Headings
 * are ATX (`## …`): the docs write no underlined (setext) ones.
 */

/** A relative link or image of `page`: the file it resolves to (repository-relative; '' for the page itself) and its anchor. */
export interface RelativeLink {
  readonly page: string;
  readonly written: string;
  readonly path: string;
  readonly anchor: string | null;
}

/** The page with its fenced code blocks and inline code spans blanked (line count kept). */
function withoutCode(body: string): string {
  return body.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, (block) => block.replace(/[^\n]/g, ' ')).replace(/(`+)[^`][\s\S]*?\1/g, (span) => span.replace(/[^\n]/g, ' '));
}

/** Every link target the page writes: inline links and images, reference definitions, HTML href and src. */
function targets(body: string): string[] {
  const text = withoutCode(body);
  return [
    ...[...text.matchAll(/!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^\s)>]+)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g)].map((m) => m[1]!),
    ...[...text.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)].map((m) => m[1]!),
    ...[...text.matchAll(/<(?:a|img|source)\b[^>]*?\s(?:href|src)\s*=\s*["']([^"']+)["']/gi)].map((m) => m[1]!),
  ];
}

/** The page's relative links (a URL with a scheme, `//host` or `mailto:` is not one), resolved against the page's folder. */
export function relativeLinks(page: string, body: string): RelativeLink[] {
  return targets(body)
    .filter((t) => !/^(?:[a-z][a-z0-9+.-]*:|\/\/)/i.test(t))
    .map((written) => {
      const hash = written.indexOf('#');
      const file = decodeURI((hash < 0 ? written : written.slice(0, hash)).replace(/\?.*$/, ''));
      const anchor = hash < 0 ? null : decodeURIComponent(written.slice(hash + 1));
      const path = file === '' ? '' : posix.normalize(posix.join(posix.dirname(page), file)).replace(/\/$/, '');
      return { page, written, path, anchor };
    });
}

/** GitHub's slug of a heading's text: lower case, markup and punctuation dropped (but - and _), spaces to -. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/[`*]/g, '')
    .replace(/(^|\s)_+|_+(?=\s|$)/g, '$1');
  return text.trim().toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** The anchors a page defines: its headings' slugs (a repeated one numbered -1, -2, … as GitHub does) and HTML ids and names. */
export function anchors(body: string): Set<string> {
  const text = withoutCode(body);
  // A heading's code spans are part of its text: read the headings' lines from the page as written.
  const lines = body.split('\n');
  const headings = [...text.matchAll(/^ {0,3}(#{1,6})[ \t]+/gm)].map((m) => {
    const line = text.slice(0, m.index).split('\n').length - 1;
    return lines[line]!.replace(/^ {0,3}#{1,6}[ \t]+/, '').replace(/[ \t]+#+[ \t]*$/, '');
  });
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const heading of headings) {
    const base = slug(heading);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    found.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of body.matchAll(/<[a-z]+\b[^>]*?\s(?:id|name)\s*=\s*["']([^"']+)["']/gi)) found.add(m[1]!);
  return found;
}
