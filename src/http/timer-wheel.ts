/**
 * One timer for every SSE connection's heartbeats, idle checks and end grace: entries in a min-heap
 * by due time, one `setTimeout` armed for the earliest. Due times are rounded up to a slot (at most
 * `slotMs`, finer for short periods so a 40 ms test heartbeat keeps its cadence), so connections
 * opened in the same slot fire in the same wake-up. A timer per connection would cost a Timeout
 * object and a libuv list insertion each; 10,000 idle streams then hold 10,000 timers.
 */

/** What the wheel holds: the object itself carries its heap position, so nothing is allocated per schedule. */
export interface WheelEntry {
  /** Due time (performance.now() clock); owned by the wheel. */
  wheelDue: number;
  /** Position in the heap, -1 when not scheduled; owned by the wheel. */
  wheelIndex: number;
  /** Called once when due; reschedule from here to repeat. */
  onWheel(now: number): void;
}

export const now = (): number => performance.now();

class TimerWheel {
  private readonly heap: WheelEntry[] = [];
  private timer: NodeJS.Timeout | null = null;
  private armedFor = Infinity;
  private firing = false;

  constructor(private readonly slotMs = 250) {}

  /** Entries scheduled. */
  get size(): number {
    return this.heap.length;
  }

  /** Node timers this wheel holds: 0 or 1, however many entries. */
  get timers(): number {
    return this.timer ? 1 : 0;
  }

  /**
   * Schedule (or move) `entry` at `due`. `periodMs` picks the rounding: an eighth of the period, at
   * most one slot, so short periods stay accurate and long ones share wake-ups.
   */
  schedule(entry: WheelEntry, due: number, periodMs: number = this.slotMs * 8): void {
    const slot = Math.max(1, Math.min(this.slotMs, Math.floor(periodMs / 8)));
    const rounded = Math.ceil(due / slot) * slot;
    if (entry.wheelIndex >= 0) this.remove(entry);
    entry.wheelDue = rounded;
    entry.wheelIndex = this.heap.length;
    this.heap.push(entry);
    this.up(entry.wheelIndex);
    if (!this.firing && rounded < this.armedFor) this.arm();
  }

  cancel(entry: WheelEntry): void {
    if (entry.wheelIndex < 0) return;
    this.remove(entry);
    if (this.heap.length === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
      this.armedFor = Infinity;
    }
  }

  private arm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const top = this.heap[0];
    if (!top) {
      this.armedFor = Infinity;
      return;
    }
    this.armedFor = top.wheelDue;
    this.timer = setTimeout(this.fire, Math.max(0, top.wheelDue - now()));
    // Streams keep the process alive through their sockets, not through heartbeats.
    this.timer.unref();
  }

  private readonly fire = (): void => {
    this.timer = null;
    this.armedFor = Infinity;
    this.firing = true;
    const t = now();
    try {
      for (let top = this.heap[0]; top && top.wheelDue <= t + 1; top = this.heap[0]) {
        this.remove(top);
        try {
          top.onWheel(t);
        } catch {
          // One entry's failure must not stop the others' heartbeats.
        }
      }
    } finally {
      this.firing = false;
      this.arm();
    }
  };

  private remove(entry: WheelEntry): void {
    const i = entry.wheelIndex;
    const last = this.heap.pop()!;
    entry.wheelIndex = -1;
    if (last === entry) return;
    this.heap[i] = last;
    last.wheelIndex = i;
    this.down(i);
    this.up(last.wheelIndex);
  }

  private up(i: number): void {
    const { heap } = this;
    const entry = heap[i]!;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = heap[p]!;
      if (parent.wheelDue <= entry.wheelDue) break;
      heap[i] = parent;
      parent.wheelIndex = i;
      i = p;
    }
    heap[i] = entry;
    entry.wheelIndex = i;
  }

  private down(i: number): void {
    const { heap } = this;
    const n = heap.length;
    const entry = heap[i]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && heap[r]!.wheelDue < heap[l]!.wheelDue ? r : l;
      const child = heap[c]!;
      if (child.wheelDue >= entry.wheelDue) break;
      heap[i] = child;
      child.wheelIndex = i;
      i = c;
    }
    heap[i] = entry;
    entry.wheelIndex = i;
  }
}

/** The process's one wheel: every SSE stream schedules on it. */
export const sharedWheel = new TimerWheel();
