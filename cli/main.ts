import { parseArgs } from 'node:util';
import { exploreCommand } from './explore.ts';
import { UsageError } from './usage.ts';

/**
 * The lockcheck command. For now one job: the model's scenario catalogue and
 * bounded exploration of every design under every fault class.
 */
const USAGE = `usage: lockcheck [explore] [--depth N] [--max-states N] [--design KIND] [--fault CLASS]

  explore   run the scenario catalogue and the bounded exhaustive exploration
            of every design x store x fault class in the model (default)

  --depth N        schedules up to N commands (default 6, 1..10)
  --max-states N   stop a cell after N distinct states (default 50000)
  --design KIND    only rows whose design kind is KIND (redis-single, redlock, pg-session, pg-xact, etcd-lease)
  --fault CLASS    only this fault class`;

function main(argv: readonly string[]): number {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      depth: { type: 'string' },
      'max-states': { type: 'string' },
      design: { type: 'string' },
      fault: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const command = positionals[0] ?? 'explore';
  if (command !== 'explore' || positionals.length > 1) throw new UsageError(`unknown command '${positionals.join(' ')}'`);
  return exploreCommand({
    depth: intOption(values.depth, 'depth', 6, 1, 10),
    maxStates: intOption(values['max-states'], 'max-states', 50_000, 1, 50_000_000),
    design: values.design,
    fault: values.fault,
  });
}

function intOption(raw: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`--${name} must be an integer in [${min}, ${max}], got '${raw}'`);
  return n;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  if (e instanceof UsageError || (e instanceof Error && 'code' in e && String((e as { code: unknown }).code).startsWith('ERR_PARSE_ARGS'))) {
    console.error(`lockcheck: ${e.message}\n\n${USAGE}`);
    process.exitCode = 2;
  } else {
    throw e;
  }
}
