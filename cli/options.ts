/** The command line's options: every one parseArgs reads, and which of them each command takes (it refuses the rest). */

/**
 * The options each command reads (--redis and --pg aside: each command says
 * itself whether it takes servers). parseArgs knows every command's options,
 * so without this one command's option given to another was silently ignored
 * (`check h.jsonl --seconds 60` ran with the default budget).
 */
export const COMMAND_OPTIONS: Record<string, readonly string[]> = {
  matrix: ['runs', 'seed', 'out', 'json', 'junit', 'backend', 'faults', 'stress-seconds'],
  run: ['backend', 'faults', 'path', 'seed', 'runs', 'json', 'junit', 'counterexample'],
  replay: ['backend'],
  check: ['json', 'report', 'store-policy', 'timeout-ms', 'memory-mib'],
  failover: ['json'],
  stress: ['backend', 'nemesis', 'store', 'ttl', 'clients', 'seconds', 'seed', 'resources', 'json', 'out'],
  explore: ['depth', 'max-states', 'design', 'fault', 'seconds', 'budget', 'memory-mib', 'jobs', 'json', 'replay'],
};

/** Every option of every command, for parseArgs (each command's own: COMMAND_OPTIONS). */
export const OPTIONS = {
  runs: { type: 'string' },
  seed: { type: 'string' },
  path: { type: 'string' },
  faults: { type: 'string' },
  backend: { type: 'string' },
  out: { type: 'string' },
  counterexample: { type: 'string' },
  json: { type: 'boolean' },
  junit: { type: 'string' },
  depth: { type: 'string' },
  'max-states': { type: 'string' },
  seconds: { type: 'string' },
  budget: { type: 'string' },
  'memory-mib': { type: 'string' },
  jobs: { type: 'string' },
  design: { type: 'string' },
  fault: { type: 'string' },
  redis: { type: 'string', multiple: true },
  pg: { type: 'string' },
  report: { type: 'string' },
  'store-policy': { type: 'string' },
  replay: { type: 'string' },
  'timeout-ms': { type: 'string' },
  clients: { type: 'string' },
  'stress-seconds': { type: 'string' },
  nemesis: { type: 'string' },
  store: { type: 'string' },
  resources: { type: 'string' },
  ttl: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const;
