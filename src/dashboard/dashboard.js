/* global document, location, sessionStorage, URLSearchParams */
// The gateway's live dashboard: the fleet from GET /capsules (polled), a records/s sparkline per
// capsule from head-offset deltas, and a live tail of the chosen capsule. Every capsule's log is
// followed over ONE connection (GET /v1/follow through the client's followMany), however large the
// fleet: a browser's six connections per origin are never used up, and choosing another capsule
// shows what was already received for it, at once. Plain ES module, no build step. With auth on
// (GET /capsules answers 401) it asks for a key once, keeps it for the tab and sends it as a Bearer
// header; the follow connection's EventSource gets short-lived tickets for it (the key itself never
// goes in a URL). A refused key is said so and asked again; nothing is polled while the page waits.
import { followMany } from '../client/murmur-gateway.js';

const KEY_STORAGE = 'murmur-gateway.dashboard.key';
const REFRESH_MS = 1000;
const SPARK_POINTS = 60;
const TAIL_ROWS = 200;

const $ = (sel) => document.querySelector(sel);
const gateway = location.origin;
const params = new URLSearchParams(location.search);
let key = sessionStorage.getItem(KEY_STORAGE);
let selected = params.get('capsule');
/** The fleet's one follow connection, and what it received per capsule (newest last). */
let fleet = null;
const received = new Map(); // capsule → tail rows' records (at most TAIL_ROWS)
let waitingForKey = false;
const history = new Map(); // capsule → {epoch, head, at, rates: number[]}

const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const child of children) node.append(child);
  return node;
};

const age = (iso) => {
  if (!iso) return '—';
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  return s < 60
    ? `${s.toFixed(1)} s ago`
    : s < 3600
      ? `${Math.floor(s / 60)} min ago`
      : `${Math.floor(s / 3600)} h ago`;
};

const sparkline = (rates) => {
  const w = 120;
  const h = 24;
  const max = Math.max(1, ...rates);
  // Newest on the right; the line grows leftwards as history accumulates.
  const step = w / (SPARK_POINTS - 1);
  const pts = rates
    .map((r, i) => `${w - (rates.length - 1 - i) * step},${h - (r / max) * (h - 2) - 1}`)
    .join(' ');
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('class', 'spark');
  svg.setAttribute('width', String(w));
  svg.setAttribute('height', String(h));
  svg.innerHTML = `<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="${pts}"/>`;
  return svg;
};

/** Records/s since the last refresh; a new epoch restarts the series (offsets jump there). */
const track = (c) => {
  const now = Date.now();
  const prev = history.get(c.id);
  const rates = prev?.rates ?? [];
  if (prev && prev.epoch === c.epoch && c.head_offset >= prev.head) {
    rates.push(((c.head_offset - prev.head) * 1000) / Math.max(1, now - prev.at));
    if (rates.length > SPARK_POINTS) rates.shift();
  }
  history.set(c.id, { epoch: c.epoch, head: c.head_offset, at: now, rates });
  return rates;
};

const authHeaders = () => (key ? { authorization: `Bearer ${key}` } : {});

/** Show the key form (with why) and stop polling until a key is given: no retry storm. */
const askForKey = (why) => {
  waitingForKey = true;
  fleet?.close();
  fleet = null;
  received.clear();
  const form = $('#key-form');
  form.hidden = false;
  $('#key-error').textContent = why;
  $('#status').textContent = 'auth required';
  $('#key').focus();
  form.onsubmit = (e) => {
    e.preventDefault();
    key = $('#key').value.trim();
    if (!key) return;
    sessionStorage.setItem(KEY_STORAGE, key);
    form.hidden = true;
    $('#key').value = '';
    waitingForKey = false;
    void refresh();
  };
};

/** Why GET /capsules refused: the first visit, a wrong key, or a key without the ops scope. */
const refusal = (status) => {
  if (status === 403) return 'This key was refused (403): it lacks the "ops" scope. Try another key.';
  return key ? 'This key was refused (401). Try another key.' : '';
};

const connectionsText = (conns) => ['murmur', 'beeos', 'flue'].map((s) => conns?.[s] ?? 0).join(' / ');

// The line the capsule runs and its card's name/version; the session id shows on hover.
const releaseText = (c) => {
  if (!c.release) return '—';
  const card = c.card?.version ? ` (${[c.card.name, c.card.version].filter(Boolean).join(' ')})` : '';
  return (c.release === 'spec' ? 'spec line' : c.release) + card;
};

/** Queue depth and the oldest wait ("3 (12 s)"), or n/a from a gateway that does not report it. */
const queueText = (c) => {
  if (c.queue_depth === undefined) return 'n/a';
  if (c.queue_depth === 0) return '0';
  return `${c.queue_depth} (${Math.round((c.queue_oldest_ms ?? 0) / 1000)} s)`;
};

const render = (body) => {
  // Both shapes: {capsules} from one gateway, {replica, capsules} with owners across replicas.
  const capsules = Array.isArray(body) ? body : (body.capsules ?? []);
  $('#replica').textContent = body.replica ? `replica ${body.replica}` : '';
  const rows = capsules.map((c) => {
    const rates = track(c);
    const missing = c.frames_possibly_missing ?? c.possibly_missing ?? null;
    const tr = el(
      'tr',
      { 'data-capsule': c.id },
      el('td', {}, c.id),
      el(
        'td',
        { class: `state-${c.upstream}` },
        c.upstream + (c.upstream_reason && c.upstream !== 'connected' ? ` (${c.upstream_reason})` : ''),
      ),
      el('td', { class: 'release', title: c.session_id ?? '' }, releaseText(c)),
      el('td', {}, c.owner ?? body.replica ?? '—'),
      el('td', { class: 'num head' }, String(c.head_offset)),
      el('td', {}, age(c.last_frame_at)),
      el('td', { class: 'num' }, String(c.reconnects)),
      el('td', { class: 'num' }, missing === null ? 'n/a' : String(missing)),
      el('td', { class: 'num queue' }, queueText(c)),
      el('td', {}, connectionsText(c.connections)),
      el('td', {}, sparkline(rates), ` ${(rates[rates.length - 1] ?? 0).toFixed(1)}`),
    );
    if (c.id === selected) tr.classList.add('selected');
    tr.onclick = () => select(c.id);
    return tr;
  });
  $('#fleet tbody').replaceChildren(...rows);
  const reported = capsules.some((c) => (c.frames_possibly_missing ?? c.possibly_missing) !== undefined);
  $('#fleet-note').textContent = reported
    ? ''
    : '"possibly missing": this gateway does not report a count in /capsules (n/a); the tail shows each such fact as it happens.';
  followFleet(capsules);
  // The chosen capsule, else (none yet, or it left the fleet) the first.
  const pick = capsules.find((c) => c.id === selected) ?? capsules[0];
  if (pick) select(pick.id);
};

// One /capsules request at a time: a key submitted while the once-a-second loop is due would
// otherwise send two requests with it (two refusals for one key).
let refreshing = null;
const refresh = () => {
  refreshing ??= refreshOnce().finally(() => {
    refreshing = null;
  });
  return refreshing;
};

const refreshOnce = async () => {
  if (waitingForKey) return;
  try {
    const res = await fetch(`${gateway}/capsules`, { headers: authHeaders() });
    if (res.status === 401 || res.status === 403) {
      const why = refusal(res.status);
      key = null;
      sessionStorage.removeItem(KEY_STORAGE);
      return askForKey(why);
    }
    if (!res.ok) throw new Error(`GET /capsules: ${res.status}`);
    render(await res.json());
    $('#status').textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    $('#status').textContent = String(err.message ?? err);
  }
};

/** One refresh a second, the next one only after the last answered (and none while asking for a key). */
const loop = async () => {
  await refresh();
  setTimeout(() => void loop(), REFRESH_MS);
};

/** A readable line for a frame: the text of text/thinking, a status's state, a tool's name. */
const preview = (event, data) => {
  let j;
  try {
    j = JSON.parse(data);
  } catch {
    return data.slice(0, 160);
  }
  if (event === 'text' || event === 'thinking') return JSON.stringify(j.text ?? '');
  if (event === 'status')
    return `${j.status?.state ?? j.state ?? ''} ${j.status?.message ?? j.message ?? ''}`.trim();
  if (event === 'artifact') {
    const a = j.artifact ?? j;
    return `${a.tool_name ?? a.name ?? 'artifact'}${a.is_error ? ' (error)' : ''}: ${String(a.content ?? '').slice(0, 120)}`;
  }
  return data.slice(0, 160);
};

/** The tail row of any record: frames as the capsule wrote them; facts and submissions summarised. */
const recordRow = (r) => {
  const row = (cls, event, id, text) =>
    el(
      'tr',
      { 'data-offset': String(r.offset), ...(cls ? { class: cls } : {}) },
      el('td', { class: 'num' }, String(r.offset)),
      el('td', {}, event),
      el('td', { class: 'num' }, id),
      el('td', { class: 'preview' }, text),
    );
  if (r.kind === 'frame') return row('', r.event, r.id ?? '·', preview(r.event, r.data));
  if (r.kind === 'submission')
    return row(
      'fact',
      'submission',
      '·',
      `${r.protocol}${r.owner ? ` (${r.owner})` : ''}: ${JSON.stringify(r.text).slice(0, 150)}`,
    );
  const detail = [
    r.reason,
    r.count !== undefined ? `${r.count} frames` : '',
    r.attempt ? `attempt ${r.attempt}` : '',
  ]
    .filter(Boolean)
    .join(' · ');
  return row(r.fact === 'frames-possibly-missing' ? 'gap' : 'fact', r.fact, '·', detail);
};

const addTailRow = (tr) => {
  const body = $('#tail tbody');
  body.prepend(tr);
  while (body.rows.length > TAIL_ROWS) body.deleteRow(body.rows.length - 1);
};

const streamOf = (capsule) => `murmur:${capsule}`;

/** A row for what a follow event of the chosen capsule says: a record, or a gap of the cursor itself. */
const eventRow = (ev) => {
  if (ev.event === 'record') return recordRow(ev.data);
  // Loss facts arrive as records; a gap event is about the cursor (retention, or one ahead of the log).
  return el(
    'tr',
    { class: 'gap' },
    el('td', { class: 'num' }, String(ev.data.first_available)),
    el('td', {}, 'gap'),
    el('td', {}, ''),
    el('td', {}, `${ev.data.reason}: from ${ev.data.first_available}`),
  );
};

/** Follow every capsule of the fleet over the one connection: new ones added, gone ones removed. */
const followFleet = (capsules) => {
  // Some recent history of each, then live.
  const start = (c) => String(Math.max(0, c.head_offset - 50));
  if (!fleet) {
    if (capsules.length === 0) return;
    fleet = followMany({
      gateway,
      streams: Object.fromEntries(capsules.map((c) => [streamOf(c.id), start(c)])),
      // SSE first, long-poll behind proxies that break it: both carry the same events.
      transport: 'auto',
      // With a key: the browser's EventSource with tickets fetched by the key (the long-poll
      // fallback sends it as a Bearer header).
      ...(key ? { token: key, useEventSource: true } : {}),
      onEvent: (ev) => {
        const capsule = ev.stream.slice('murmur:'.length);
        if (ev.event !== 'record' && ev.event !== 'gap') return;
        const rows = received.get(capsule) ?? [];
        rows.push(ev);
        if (rows.length > TAIL_ROWS) rows.shift();
        received.set(capsule, rows);
        if (capsule === selected) addTailRow(eventRow(ev));
      },
      onState: (s) =>
        ($('#tail-state').textContent =
          `${s.state} · ${s.transport}${s.state === 'closed' && s.reason ? ` (${s.reason})` : ''}`),
    });
    return;
  }
  const now = new Set(capsules.map((c) => streamOf(c.id)));
  for (const c of capsules) if (!(streamOf(c.id) in fleet.cursors)) fleet.add(streamOf(c.id), start(c));
  for (const stream of Object.keys(fleet.cursors))
    if (!now.has(stream)) {
      fleet.remove(stream);
      received.delete(stream.slice('murmur:'.length));
    }
};

/** Show a capsule's tail: what the fleet's connection already received for it, then what comes. */
function select(capsule) {
  if (selected === capsule && $('#tail-name').textContent === `· ${capsule}`) return;
  selected = capsule;
  $('#tail-name').textContent = `· ${capsule}`;
  $('#tail tbody').replaceChildren(...(received.get(capsule) ?? []).map(eventRow).reverse());
  for (const row of document.querySelectorAll('#fleet tbody tr'))
    row.classList.toggle('selected', row.dataset.capsule === capsule);
}

void loop();
