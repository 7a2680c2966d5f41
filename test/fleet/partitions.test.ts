/**
 * Partitions, not crashes: paths cut silently (DROP, no RST, no FIN) between network namespaces
 * (test/support/netns.ts), one test per path. Each waits on what the product must do (a stream
 * ended, a 503, a takeover, a log line), bounded by a deadline far above the expected figure, and
 * prints the figures it measured on stderr (docs/fleet.md "Partitions").
 *
 * Needs root, iproute2 and iptables: skipped without them, unless REQUIRE_NETNS=1 (CI), which makes
 * their absence a failure.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { labNamespaces, netnsUnavailable } from '../support/netns.js';
import {
  CAPSULE,
  CAPSULE_HEARTBEAT_MS,
  SPEC_CAPSULE,
  startPartitionFleet,
  until,
  type PartitionFleet,
  type Replica,
  type SseHandle,
} from './partition-rig.js';

const unavailable = netnsUnavailable();
if (unavailable && process.env.REQUIRE_NETNS === '1') {
  throw new Error(`REQUIRE_NETNS=1 but network namespaces are unavailable here: ${unavailable}`);
}

/** Far above every expected figure: a wait that passes it means the path was not noticed at all. */
const NOTICE_BOUND_MS = 15_000;

const figures: Record<string, unknown> = {};
const figure = (name: string, value: unknown): void => {
  figures[name] = value;
  process.stderr.write(`partition figure: ${name} = ${JSON.stringify(value)}\n`);
};

/** The pino time of the first line of `r`'s output matching `re` (from `after` on). */
const logTime = async (r: Replica, re: RegExp, after: number): Promise<number> =>
  until(`${r.id}: a log line matching ${re}, in:\n${r.proc.output.slice(-12).join('\n')}\n`, async () => {
    for (const line of r.proc.output) {
      if (!re.test(line)) continue;
      const time = /"time":(\d+)/.exec(line);
      if (time && Number(time[1]) >= after) return Number(time[1]);
    }
    return null;
  });

interface PollAnswer {
  records: { offset: number; kind: string; id?: string | null; fact?: string }[];
  next_cursor: number;
  head: number;
}

describe.skipIf(unavailable !== null)(
  'partitions (network namespaces, DROP rules)',
  { timeout: 60_000 },
  () => {
    let fleet: PartitionFleet;
    let labId = '';

    beforeAll(async () => {
      fleet = await startPartitionFleet();
      labId = fleet.lab.id;
    }, 60_000);

    afterEach(() => fleet?.lab.healAll());

    afterAll(async () => {
      const lab = fleet?.lab;
      await fleet?.close();
      if (lab) expect(labNamespaces(lab)).toEqual([]);
      process.stderr.write(`partition figures (lab ${labId}): ${JSON.stringify(figures)}\n`);
    });

    const events = (r: Replica, lastEventId?: string): SseHandle =>
      fleet.client.sse(
        `${r.url}/murmur/${CAPSULE}/events`,
        lastEventId ? { 'last-event-id': lastEventId } : {},
      );

    const firstEvent = (s: SseHandle): Promise<string> =>
      until(`an event on ${s.id}`, async () => s.events.find((e) => e.eventId !== null)?.eventId ?? null);

    const head = async (r: Replica): Promise<number> => {
      const { row } = await fleet.row(r);
      if (row.head_offset === null) throw new Error(`${r.id}: no head`);
      return row.head_offset;
    };

    it('owner <-> Redis: its readers get their retry signal, long-polls 503, /capsules degraded; it serves again after the heal', async () => {
      const { owner, other } = await fleet.roles();
      const onOwner = events(owner);
      const onOther = events(other);
      await Promise.all([firstEvent(onOwner), firstEvent(onOther)]);
      const cursor = await head(owner);

      const cutAt = Date.now();
      fleet.lab.cut(owner.node, fleet.redis);
      // The live reader on the cut replica is ended (the murmur wire's retry signal: the connection
      // ends; the reader resumes by Last-Event-ID, on a replica that reaches the store).
      const ended = await Promise.race([
        onOwner.ended,
        new Promise<null>((r) => setTimeout(() => r(null), NOTICE_BOUND_MS)),
      ]);
      expect(ended, 'the SSE reader on the cut replica was never ended').not.toBeNull();
      figure('owner-redis: SSE reader on the cut replica ended after (ms)', ended!.at - cutAt);
      const lastSeen = [...onOwner.events].reverse().find((e) => e.eventId !== null)!.eventId!;

      // A long-poll there: 503 with Retry-After, never an empty 200.
      const poll = await fleet.client.fetch(`${owner.url}/murmur/${CAPSULE}/poll?after=${cursor}&wait=2`);
      expect(poll.status).toBe(503);
      expect(poll.retryAfter).toBe('1');
      expect(JSON.parse(poll.body)).toMatchObject({ error: { code: 'store_unavailable' } });
      // A new stream there ends at once (after its connection-ack), not opened onto silence.
      const late = events(owner);
      await late.ended;
      expect(late.events.filter((e) => e.eventId !== null)).toEqual([]);
      // Ops routes answer: /capsules degraded (store fields null), /readyz 503, /metrics 200.
      const degraded = await fleet.row(owner);
      expect(degraded.store).toBe('unreachable');
      expect(degraded.row.head_offset).toBeNull();
      expect((await fleet.client.fetch(`${owner.url}/readyz`)).status).toBe(503);
      expect((await fleet.client.fetch(`${owner.url}/metrics`)).status).toBe(200);

      // The other replica takes the capsule over and its reader keeps receiving.
      await until('the other replica ingests', async () => {
        const { row } = await fleet.row(other);
        return row.owner === other.id && row.upstream === 'connected';
      });
      figure('owner-redis: other replica ingesting after (ms)', Date.now() - cutAt);
      // The ended reader resumes on the healthy replica from its cursor.
      const resumed = events(other, lastSeen);
      const next = Number(await firstEvent(resumed));
      expect(next).toBeGreaterThan(Number(lastSeen));
      resumed.close();

      const healAt = Date.now();
      fleet.lab.heal(owner.node, fleet.redis);
      await until(
        'the healed replica serving long-polls',
        async () =>
          (await fleet.client.fetch(`${owner.url}/murmur/${CAPSULE}/poll?after=${cursor}&wait=1`)).status ===
          200,
      );
      figure('owner-redis: healed replica answering long-polls again after (ms)', Date.now() - healAt);
      expect(onOther.events.some((e) => e.at > cutAt && e.eventId !== null)).toBe(true);
      onOther.close();
    });

    it('owner <-> capsule: noticed in seconds, another replica takes over, never two watchers, nothing duplicated', async () => {
      const { owner, other } = await fleet.roles();
      const before = await head(other);
      // The watch has seen the capsule's heartbeats (its interval is learnt from them; before the
      // first one the configured interval stands): the steady state is what is measured.
      await until('the watch connected for a few capsule heartbeats', async () => {
        const connected = owner.proc.output.filter((l) => l.includes('"to":"connected"')).at(-1);
        const at = connected ? Number(/"time":(\d+)/.exec(connected)?.[1]) : NaN;
        return Date.now() - at >= 3 * CAPSULE_HEARTBEAT_MS;
      });
      const cutAt = Date.now();
      fleet.lab.cut(owner.node, fleet.capsule);
      await until(
        'the other replica watching the capsule',
        async () => {
          const { row } = await fleet.row(other);
          return row.owner === other.id && row.upstream === 'connected';
        },
        NOTICE_BOUND_MS,
      );
      const takeover = Date.now() - cutAt;
      const lost = await logTime(owner, /"capsule":"cap".*"to":"backoff"/, cutAt);
      const handedOver = await logTime(
        owner,
        /"capsule":"cap".*upstream unreachable.*capsule handed over/,
        cutAt,
      );
      const acquired = await logTime(other, /"capsule":"cap".*capsule acquired/, cutAt);
      figure('owner-capsule: watch lost after (ms)', lost - cutAt);
      figure('owner-capsule: lease handed over after (ms)', handedOver - cutAt);
      figure('owner-capsule: other replica watching after (ms)', takeover);
      // Never two watchers: the cut owner stopped its watch before it released the lease.
      expect(handedOver).toBeLessThanOrEqual(acquired);
      expect((await fleet.row(owner)).row.upstream).not.toBe('connected');

      // The log across the cut: no frame twice; every hole in the 0.4 id sequence flagged.
      await until('frames after the takeover', async () => (await head(other)) > before + 40);
      fleet.lab.heal(owner.node, fleet.capsule);
      const page = await fleet.client.json<PollAnswer>(
        `${other.url}/murmur/${CAPSULE}/poll?after=${before}&limit=1000`,
      );
      const ids: number[] = [];
      let flagged = false;
      let unflaggedHoles = 0;
      for (const r of page.records) {
        if (r.kind === 'fact' && r.fact === 'frames-possibly-missing') flagged = true;
        if (r.kind === 'fact' && r.fact === 'capsule-session-started') ids.length = 0;
        if (r.kind !== 'frame' || r.id === null || r.id === undefined) continue;
        const id = Number(r.id);
        const prev = ids[ids.length - 1];
        if (prev !== undefined && id !== prev + 1 && !flagged) unflaggedHoles++;
        ids.push(id);
        flagged = false;
      }
      expect(new Set(ids).size).toBe(ids.length);
      expect(unflaggedHoles).toBe(0);
      expect(ids.length).toBeGreaterThan(10);
    });

    it('owner <-> spec-line capsule: found dead by TCP keep-alive (no heartbeat check there), handed over', async () => {
      const { owner, other } = await fleet.roles(SPEC_CAPSULE);
      const cutAt = Date.now();
      fleet.lab.cut(owner.node, fleet.specCapsule);
      await until(
        'the other replica watching the spec-line capsule',
        async () => {
          const { row } = await fleet.row(other, SPEC_CAPSULE);
          return row.owner === other.id && row.upstream === 'connected';
        },
        30_000,
      );
      const takeover = Date.now() - cutAt;
      const lostLine = /"capsule":"spec".*"to":"backoff"/;
      const lost = await logTime(owner, lostLine, cutAt);
      const handedOver = await logTime(
        owner,
        /"capsule":"spec".*upstream unreachable.*capsule handed over/,
        cutAt,
      );
      const acquired = await logTime(other, /"capsule":"spec".*capsule acquired/, cutAt);
      figure('owner-spec-capsule: watch lost (keep-alive) after (ms)', lost - cutAt);
      figure('owner-spec-capsule: other replica watching after (ms)', takeover);
      // The kernel's keep-alive said so (the socket timed out), not a heartbeat deadline.
      const reason = owner.proc.output.find(
        (l) => lostLine.test(l) && Number(/"time":(\d+)/.exec(l)?.[1]) >= cutAt,
      );
      expect(reason).not.toMatch(/no heartbeat/);
      expect(handedOver).toBeLessThanOrEqual(acquired);
    });

    it('client <-> replica: the replica closes the dead stream within seconds', async () => {
      const { other: replica } = await fleet.roles();
      const stream = events(replica);
      await firstEvent(stream);
      const open = async (): Promise<number> => (await fleet.row(replica)).row.connections.murmur ?? 0;
      expect(await open()).toBeGreaterThan(0);
      const cutAt = Date.now();
      fleet.lab.cut(fleet.clientNode, replica.node);
      const closedAt = await until(
        'the replica closing the unacknowledged stream',
        async () => {
          const line = replica.proc.output.find((l) => l.includes('client stopped acknowledging'));
          const time = line ? /"time":(\d+)/.exec(line) : null;
          return time && Number(time[1]) >= cutAt ? Number(time[1]) : null;
        },
        NOTICE_BOUND_MS,
      );
      figure('client-replica: dead stream closed by the replica after (ms)', closedAt - cutAt);
      fleet.lab.heal(fleet.clientNode, replica.node);
      stream.close();
      await until('no murmur connection left open on the replica', async () => (await open()) === 0);
    });

    it('Redis <-> everyone: both replicas say so; both serve again within seconds of the heal', async () => {
      const [a, b] = fleet.replicas;
      const onA = events(a);
      const onB = events(b);
      await Promise.all([firstEvent(onA), firstEvent(onB)]);
      const cursors = await Promise.all([head(a), head(b)]);
      const cutAt = Date.now();
      fleet.lab.cut(a.node, fleet.redis);
      fleet.lab.cut(b.node, fleet.redis);
      const ends = await Promise.all([onA.ended, onB.ended]);
      figure(
        'redis-everyone: SSE readers ended after (ms)',
        ends.map((e) => e.at - cutAt),
      );
      for (const r of fleet.replicas) {
        const answer = await fleet.client.fetch(`${r.url}/capsules`);
        expect(answer.status).toBe(200);
        expect(JSON.parse(answer.body)).toMatchObject({ store: 'unreachable' });
      }
      // Held long enough for every lease and heartbeat to lapse.
      await until('both replicas refusing long-polls', async () => {
        const answers = await Promise.all(
          fleet.replicas.map((r, i) =>
            fleet.client.fetch(`${r.url}/murmur/${CAPSULE}/poll?after=${cursors[i]}&wait=1`),
          ),
        );
        return answers.every((x) => x.status === 503) && Date.now() - cutAt > 3000;
      });

      const healAt = Date.now();
      fleet.lab.heal(a.node, fleet.redis);
      fleet.lab.heal(b.node, fleet.redis);
      const served = await Promise.all(
        fleet.replicas.map(async (r, i) => {
          // Serving again: a long-poll from before the cut answers with records written after the heal.
          await until(`${r.id} serving new records`, async () => {
            const answer = await fleet.client.fetch(
              `${r.url}/murmur/${CAPSULE}/poll?after=${cursors[i]}&wait=1`,
            );
            if (answer.status !== 200) return false;
            const body = JSON.parse(answer.body) as PollAnswer;
            return body.head > cursors[i]! + 1;
          });
          return Date.now() - healAt;
        }),
      );
      figure('redis-everyone: replicas serving again after the heal (ms)', served);
      await until('a replica watching the capsule again, named by both', async () => {
        const rows = await Promise.all(fleet.replicas.map((r) => fleet.row(r)));
        const owner = rows[0]!.row.owner;
        const o = fleet.replicas.findIndex((r) => r.id === owner);
        return o >= 0 && rows[1]!.row.owner === owner && rows[o]!.row.upstream === 'connected';
      });
      figure('redis-everyone: capsule watched again after the heal (ms)', Date.now() - healAt);
      // And it stays so (no owner flapping after the heal).
      const { owner } = await fleet.roles();
      expect(owner).toBeDefined();
    });
  },
);
