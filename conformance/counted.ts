/** "1 fault", "3 faults", "0 faults": a count and its noun, in the number the count asks for (`plural` where adding an s is wrong: "processes"). */
export function counted(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}

/** A count a check may not have taken (null: its budget ran out first): said so, never printed as a 0 that reads as counted. */
export function countedIfKnown(n: number | null, noun: string, plural = `${noun}s`): string {
  return n === null ? `${plural} not counted` : counted(n, noun, plural);
}

/** The bare number, or 'not counted' (see countedIfKnown). */
export function countText(n: number | null): string {
  return n === null ? 'not counted' : String(n);
}
