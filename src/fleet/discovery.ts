/**
 * Discovery of capsules running on this host (`--discover-running [DIR]`, default ~/.murmur/running):
 * each `<session_id>.json` record is a hint, fronted only while it is current (docs/fleet.md):
 * its pid is alive, that process started when the record says, and the capsule's agent card reports
 * the same session id. Valid records become registry entries (source `discovered`); an entry whose
 * record stops validating is removed. Rescanned every `rescanMs` and soon after the directory changes.
 */
import { watch, type FSWatcher } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { CapsuleEntry, CapsuleRegistry } from './registry.js';
import { processStartMs, startTimesMatch } from './process-start.js';
import { extendedCardSessionId, readAgentCard, type CapsuleCard } from '../upstream/agent-card.js';

const recordSchema = z.object({
  session_id: z.string().min(1),
  // Later lines write `host:port` without a scheme.
  url: z
    .string()
    .transform((u) => (/^[a-z][a-z0-9+.-]*:\/\//i.test(u) ? u : `http://${u}/`))
    .refine((u) => /^https?:\/\/[^/]/.test(u), 'must be an http(s) URL or host:port'),
  pid: z.number().int().positive(),
  process_start: z.union([z.number(), z.string()]),
  capsule_name: z.string().min(1),
  door_token: z.string().min(1).optional(),
  started_at: z.string().optional(),
});
export type RunningRecord = z.output<typeof recordSchema>;

/** `capsule_name` → the id grammar: foreign characters become '-', at most `max` characters. */
export const sanitiseCapsuleName = (name: string, max = 64): string => {
  const cleaned = name
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, max)
    .replace(/-+$/, '');
  return cleaned === '' ? 'capsule' : cleaned;
};

const pidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: alive, just not ours to signal.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

export interface DiscoveryOptions {
  dir: string;
  registry: CapsuleRegistry;
  /** default 10 s */
  rescanMs?: number;
  /** agent card fetch bound, default 2 s */
  fetchTimeoutMs?: number;
  logger?: Logger;
}

export class RunningCapsuleDiscovery {
  /** `host:dir`: entries this scan made carry it, so it removes only its own. */
  readonly tag: string;
  private readonly dir: string;
  /** session id → capsule id given, kept while the record stays valid (ids do not move). */
  private readonly assigned = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;
  private watcher: FSWatcher | null = null;
  private scanning: Promise<void> | null = null;
  private again = false;
  private closed = false;

  constructor(private readonly options: DiscoveryOptions) {
    this.dir = resolve(options.dir);
    this.tag = `${hostname()}:${this.dir}`;
  }

  start(): void {
    this.timer = setInterval(() => void this.scan(), this.options.rescanMs ?? 10_000);
    this.timer.unref();
    try {
      // Cheap where inotify exists; the interval covers platforms and directories it misses.
      this.watcher = watch(this.dir, () => void this.scan());
      this.watcher.on('error', () => {});
    } catch {
      this.watcher = null;
    }
    void this.scan();
  }

  /** One scan (coalesced with one in flight); resolves when the registry reflects it. */
  scan(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.scanning) {
      this.again = true;
      return this.scanning;
    }
    this.scanning = (async () => {
      do {
        this.again = false;
        await this.scanOnce().catch((err: unknown) =>
          this.options.logger?.warn({ err: (err as Error).message }, 'discovery: scan failed'),
        );
      } while (this.again && !this.closed);
    })().finally(() => {
      this.scanning = null;
    });
    return this.scanning;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.watcher?.close();
    await this.scanning;
  }

  private async scanOnce(): Promise<void> {
    const valid = await this.validRecords();
    const { registry } = this.options;
    const existing = await registry.list();
    const taken = (id: string): boolean => {
      const e = existing.get(id);
      return e !== undefined && !(e.source === 'discovered' && e.discoveredBy === this.tag);
    };
    // Oldest first, so the bare name goes to the same record whatever order readdir gives.
    valid.sort(
      (a, b) =>
        (a.started_at ?? '').localeCompare(b.started_at ?? '') || a.session_id.localeCompare(b.session_id),
    );
    const desired = new Map<string, RunningRecord>();
    const nextAssigned = new Map<string, string>();
    for (const r of valid) {
      const kept = this.assigned.get(r.session_id);
      const base = sanitiseCapsuleName(r.capsule_name);
      const suffixed = `${sanitiseCapsuleName(r.capsule_name, 55)}-${sanitiseCapsuleName(r.session_id.replace(/^ses_/, '')).slice(0, 8)}`;
      const id = [kept, base, suffixed].find((c) => c !== undefined && !desired.has(c) && !taken(c));
      if (!id) {
        this.options.logger?.warn(
          { session: r.session_id, name: r.capsule_name },
          'discovery: no free capsule id',
        );
        continue;
      }
      desired.set(id, r);
      nextAssigned.set(r.session_id, id);
    }
    this.assigned.clear();
    for (const [s, id] of nextAssigned) this.assigned.set(s, id);

    for (const [id, r] of desired) {
      const before = existing.get(id);
      if (before && before.url === r.url && before.doorToken === r.door_token) continue;
      const entry: CapsuleEntry = {
        url: r.url,
        ...(r.door_token ? { doorToken: r.door_token } : {}),
        source: 'discovered',
        updatedAt: Date.now(),
        discoveredBy: this.tag,
      };
      await registry.put(id, entry);
      this.options.logger?.info(
        { capsule: id, url: r.url, session: r.session_id },
        'discovery: capsule found',
      );
    }
    for (const [id, e] of existing) {
      if (e.source !== 'discovered' || e.discoveredBy !== this.tag || desired.has(id)) continue;
      await registry.remove(id);
      this.options.logger?.info({ capsule: id }, 'discovery: capsule gone');
    }
  }

  private async validRecords(): Promise<RunningRecord[]> {
    let names: string[];
    try {
      names = (await readdir(this.dir)).filter((n) => n.endsWith('.json'));
    } catch {
      return [];
    }
    const checked = await Promise.all(names.sort().map((n) => this.check(join(this.dir, n))));
    return checked.filter((r): r is RunningRecord => r !== null);
  }

  /** The record, if it is current; else null (and why, at debug level). */
  private async check(file: string): Promise<RunningRecord | null> {
    const reject = (why: string): null => {
      this.options.logger?.debug({ file, why }, 'discovery: record skipped');
      return null;
    };
    let record: RunningRecord;
    try {
      const parsed = recordSchema.safeParse(JSON.parse(await readFile(file, 'utf8')));
      if (!parsed.success) return reject('not a running-capsule record');
      record = parsed.data;
    } catch {
      return reject('unreadable');
    }
    if (!pidAlive(record.pid)) return reject('pid not alive');
    const actual = await processStartMs(record.pid);
    // No /proc (not Linux): the pid and the agent card are all there is to check.
    if (actual !== null && !startTimesMatch(record.process_start, actual)) return reject('pid reused');
    let card: CapsuleCard;
    try {
      card = await readAgentCard(record.url, { timeoutMs: this.options.fetchTimeoutMs ?? 2_000 });
    } catch (err) {
      return reject((err as Error).message);
    }
    // An authenticated door (0.5+) names its session on the extended card only.
    const session =
      card.sessionId ??
      (record.door_token
        ? await extendedCardSessionId(
            record.url,
            record.door_token,
            card.line,
            this.options.fetchTimeoutMs,
          ).catch(() => null)
        : null);
    if (session !== record.session_id) return reject('agent card: another session');
    return record;
  }
}
