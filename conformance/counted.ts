/** "1 fault", "3 faults", "0 faults": a count and its noun, in the number the count asks for (`plural` where adding an s is wrong: "processes"). */
export function counted(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}
