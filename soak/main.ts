/**
 * npm run soak [-- --minutes M] [--holders N]: the soak of issue 17 on
 * servers it starts and stops itself (4 redis-server, 1 PostgreSQL). Default
 * 10 minutes, 500 holders. Progress on stderr, the report (markdown) on stdout.
 */
import os from 'node:os';
import { runSoak, type SoakSample } from './soak.ts';

function option(name: string, fallback: number, min: number, max: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v < min || v > max) {
    process.stderr.write(`--${name} must be a number in [${min}, ${max}]\n`);
    process.exit(2);
  }
  return v;
}

const minutes = option('minutes', 10, 0.1, 120);
const holders = Math.round(option('holders', 500, 3, 5000));
const durationMs = Math.round(minutes * 60_000);
const sampleEveryMs = Math.max(5_000, Math.round(durationMs / 40));
const load = (): string => os.loadavg().map((x) => x.toFixed(2)).join(' ');
const row = (s: SoakSample): string =>
  `| ${s.atS} | ${s.acquisitionsPerS.redis} | ${s.acquisitionsPerS.redlock} | ${s.acquisitionsPerS.postgres} | ${s.heapMb} | ${s.handles} | ${s.trackedLeases} | ${s.backgroundRounds} | ${s.faults.join(', ')} |`;

const loadAtStart = load();
process.stderr.write(`soak: ${minutes} min, ${holders} holders, a sample every ${sampleEveryMs / 1000} s, load ${loadAtStart}\n`);
const report = await runSoak({
  durationMs,
  holders,
  resources: 60,
  sampleEveryMs,
  faultEveryMs: 10_000,
  ttlMs: 2_000,
  onSample: (s) => process.stderr.write(`${row(s)}\n`),
});
const pct = (a: number, b: number): string => (b === 0 ? 'n/a (none)' : `${((100 * a) / b).toFixed(1)} % (${a} of ${b})`);
const out = (line = ''): void => void process.stdout.write(`${line}\n`);
out('## Soak');
out();
out(`${new Date().toISOString()} · node ${process.version} · ${minutes} min · ${holders} holders over Redis (1 node), Redlock (3 nodes) and PostgreSQL session locks, ttl 2000 ms with using() auto-extension · a fault every 10 s in turn: ${Object.keys(report.faults).join(', ')} · load average at start ${loadAtStart}, at end ${load()}`);
out();
out('| t (s) | acq/s Redis | acq/s Redlock | acq/s PostgreSQL | heap MB | handles | tracked leases | background rounds | faults in the interval |');
out('|---:|---:|---:|---:|---:|---:|---:|---:|---|');
for (const s of report.samples) out(row(s));
out();
out('| measure | value |');
out('|---|---|');
out(`| acquisitions | ${report.acquisitions} |`);
out(`| unhandled rejections | ${report.unhandledRejections} |`);
out(`| stale writes accepted by the fenced stores | ${report.staleWritesAccepted} |`);
out(`| fenced writes accepted / rejected / failed (server unreachable) | ${report.writesAccepted} / ${report.writesRejected} / ${report.writeErrors} |`);
out(`| **safety:** uses of a ttl lease its signal allowed (read at the moment of use, before each write) that came before the servers' earliest expiry (must be 100 %) | ${pct(report.usesAllowed - report.usesAllowedAfterExpiry, report.usesAllowed)} |`);
out(`| uses the signal refused (the lease was past its deadline, lost or released) | ${report.usesRefused} |`);
out(`| **timer:** ttl leases lost by expiry whose signal's event fired (by its timer, or at an earlier read past the deadline) before the servers' earliest expiry (client not paused) | ${pct(report.expiredInTime, report.expired)} |`);
out(`| worst lateness of such a signal against its schedule, less its timer's own / worst event-loop stall of this process (it also restarts the servers) | ${report.worstLatenessMs} ms / ${report.worstLoopDelayMs} ms |`);
out(`| such signals later than the worst stall explains (must be 0) | ${report.expiredLateUnexplained} |`);
out(`| the same for leases whose client was paused during the lease (its timers wait for the resume) | ${pct(report.expiredWhilePausedInTime, report.expiredWhilePaused)} |`);
out(`| PostgreSQL leases lost with their connection | ${report.lostConnection} |`);
out(`| acquisitions denied after retries | ${report.notAcquired} |`);
out(`| other errors | ${JSON.stringify(report.otherErrors)} |`);
for (const [name, sample] of Object.entries(report.otherErrorSamples)) out(`| first ${name} | ${sample.replaceAll('|', '\\|')} |`);
out(`| faults | ${JSON.stringify(report.faults)} |`);
