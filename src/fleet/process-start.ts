/**
 * When a process started, to tell a live pid from a reused one (a running-capsule record names its
 * process by pid and start time). Linux: /proc/<pid>/stat field 22 (clock ticks after boot) plus
 * the boot time from /proc/stat.
 */
import { readFile } from 'node:fs/promises';

/** USER_HZ: 100 on every mainstream Linux build (not exposed to Node). */
const CLOCK_TICKS_PER_SECOND = 100;

export interface ProcessStart {
  /** field 22 as written */
  ticks: number;
  /** ms since the epoch */
  ms: number;
}

/** Null when there is no /proc (not Linux) or the process is gone. */
export const processStartMs = async (pid: number): Promise<ProcessStart | null> => {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    const btime = /^btime (\d+)$/m.exec(await readFile('/proc/stat', 'utf8'));
    if (!Number.isFinite(ticks) || !btime) return null;
    return { ticks, ms: Number(btime[1]) * 1000 + (ticks * 1000) / CLOCK_TICKS_PER_SECOND };
  } catch {
    return null;
  }
};

/** Boot time is whole seconds and moves with clock adjustments: allow this much either way. */
const TOLERANCE_MS = 1_500;

/**
 * A record's `process_start` against the process's: the raw field-22 ticks exactly, or a time
 * (ISO string, or epoch seconds / milliseconds) within the tolerance.
 */
export const startTimesMatch = (recorded: number | string, actual: ProcessStart): boolean => {
  const n = typeof recorded === 'number' ? recorded : /^\d+(\.\d+)?$/.test(recorded) ? Number(recorded) : NaN;
  if (Number.isFinite(n)) {
    if (n === actual.ticks) return true;
    const ms = n > 1e11 ? n : n * 1000;
    return Math.abs(ms - actual.ms) <= TOLERANCE_MS;
  }
  const parsed = Date.parse(String(recorded));
  return Number.isFinite(parsed) && Math.abs(parsed - actual.ms) <= TOLERANCE_MS;
};
