/**
 * The Grafana dashboard (config/grafana) and its provisioning in docker-compose.yml. Docker does not
 * run in the tests: the files are parsed, and every metric a panel queries is checked against what a
 * real gateway's /metrics declares, so a renamed metric cannot leave a panel silently empty.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

const root = resolve(import.meta.dirname, '../..');
const read = (path: string): string => readFileSync(resolve(root, path), 'utf8');

interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { uid: string };
  targets?: { expr: string; datasource?: { uid: string } }[];
}
interface Dashboard {
  uid: string;
  panels: Panel[];
  templating: { list: { query: { query: string } }[] };
}

const dashboard = JSON.parse(read('config/grafana/dashboards/murmur-gateway.json')) as Dashboard;
const panels = dashboard.panels.filter((p) => p.type !== 'row');
const exprs = [
  ...panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
  ...dashboard.templating.list.map((v) => v.query.query),
];
/** Metric families the queries name (a histogram's _bucket, _count and _sum are its family). */
const queried = new Set(
  exprs.flatMap((e) =>
    [...e.matchAll(/murmur_gateway_[a-z0-9_]+/g)].map((m) => m[0].replace(/_(bucket|count|sum)$/, '')),
  ),
);

describe('the Grafana dashboard', () => {
  let sim: SimulatedCapsule;
  let gw: TestGateway;
  beforeAll(async () => {
    sim = await startSimulator({ heartbeatMs: 200 });
    gw = await startTestGateway({ capsules: { cap: sim.url } });
  }, 30_000);
  afterAll(async () => {
    await gw?.close();
    await sim?.stop();
  });

  it('queries only metrics the gateway declares on /metrics', async () => {
    const text = await (await fetch(`${gw.baseUrl}/metrics`)).text();
    const declared = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    expect(queried.size).toBeGreaterThan(10);
    for (const name of queried) expect(declared, name).toContain(name);
  });

  it("covers the issue's panels: upstream state, ingest, queue, hand-off, first frame, lag, readers, loss", () => {
    for (const name of [
      'murmur_gateway_upstream_connected',
      'murmur_gateway_log_head_offset',
      'murmur_gateway_queue_depth',
      'murmur_gateway_queue_oldest_seconds',
      'murmur_gateway_submission_handoff_seconds',
      'murmur_gateway_time_to_first_frame_seconds',
      'murmur_gateway_delivery_lag_seconds',
      'murmur_gateway_open_connections',
      'murmur_gateway_frames_possibly_missing',
      'murmur_gateway_log_dropped_frames',
    ])
      expect(queried, name).toContain(name);
    // Percentiles of each latency histogram.
    for (const h of ['submission_handoff', 'time_to_first_frame', 'delivery_lag'])
      for (const q of ['0.5', '0.95', '0.99'])
        expect(
          exprs.some((e) => e.startsWith(`histogram_quantile(${q},`) && e.includes(h)),
          `${h} p${q}`,
        ).toBe(true);
  });

  it('is well formed: unique panel ids, every query on the provisioned data source', () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const sources = parse(read('config/grafana/provisioning/datasources/prometheus.yaml')) as {
      datasources: { uid: string; url: string }[];
    };
    const uid = sources.datasources[0]!.uid;
    for (const p of panels) {
      expect(p.datasource?.uid, p.title).toBe(uid);
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets ?? []) expect(t.datasource?.uid ?? uid, p.title).toBe(uid);
    }
  });

  it('is provisioned by docker-compose.yml: Prometheus scrapes every replica, Grafana loads the files', () => {
    const compose = parse(read('docker-compose.yml')) as {
      services: Record<string, { volumes?: string[]; image?: string }>;
    };
    const { prometheus, grafana } = compose.services;
    expect(prometheus?.image).toMatch(/^prom\/prometheus:/);
    expect(grafana?.image).toMatch(/^grafana\/grafana:/);
    // Every mounted path exists in the repository.
    for (const volume of [...(prometheus?.volumes ?? []), ...(grafana?.volumes ?? [])]) {
      const source = volume.split(':')[0]!;
      expect(existsSync(resolve(root, source)), source).toBe(true);
    }
    const provider = parse(read('config/grafana/provisioning/dashboards/murmur.yaml')) as {
      providers: { options: { path: string } }[];
    };
    expect(grafana?.volumes?.some((v) => v.endsWith(`:${provider.providers[0]!.options.path}:ro`))).toBe(
      true,
    );
    const scrape = parse(read('config/prometheus.yml')) as {
      scrape_configs: { job_name: string; static_configs: { targets: string[] }[] }[];
    };
    const job = scrape.scrape_configs.find((j) => j.job_name === 'murmur-gateway')!;
    // The job label every panel filters on, and one target per gateway service of the compose file.
    expect(exprs.every((e) => e.includes('job="murmur-gateway"'))).toBe(true);
    const gateways = Object.keys(compose.services).filter((s) => /^gateway-\d+$/.test(s));
    expect(job.static_configs.flatMap((c) => c.targets).sort()).toEqual(
      gateways.map((g) => `${g}:8080`).sort(),
    );
  });
});
