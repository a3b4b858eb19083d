/** "1 fault", "3 faults", "0 faults": a count and its noun, in the number the count asks for. */
export function counted(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
