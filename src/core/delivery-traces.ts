/**
 * The last hop of a submission's trace: its task's frames written to clients, one span per surface
 * serving them on this replica. The hand-off's `submission-started` fact carries its traceparent
 * (dispatcher.ts), so whichever replica serves the readers joins the trace from the log. Fed by the
 * hub's fan-out hook (after each live batch); does nothing while tracing is off.
 */
import type { LogRecord } from '../log/record.js';
import { viewFrame } from '../log/frame-view.js';
import { contextOf, endSpan, startSpan, tracingOn } from '../tracing.js';

/** Tasks whose first delivery is awaited here; past this, the oldest is forgotten (a bound, not a rule). */
const MAX_TRACKED = 1_024;

export const deliveryTraces = () => {
  const traced = new Map<string, string>();
  return (records: readonly LogRecord[], surfaces: readonly string[]): void => {
    if (!tracingOn()) return;
    const delivered: { record: LogRecord; taskId: string; trace: string }[] = [];
    for (const r of records) {
      if (r.kind === 'fact') {
        if (r.fact === 'submission-started' && r.trace) {
          traced.set(r.taskId, r.trace);
          if (traced.size > MAX_TRACKED) traced.delete(traced.keys().next().value!);
        }
        continue;
      }
      if (r.kind !== 'frame' || traced.size === 0) continue;
      const taskId = viewFrame(r)?.taskId;
      const trace = taskId ? traced.get(taskId) : undefined;
      if (!taskId || !trace) continue;
      traced.delete(taskId);
      delivered.push({ record: r, taskId, trace });
    }
    if (delivered.length === 0) return;
    // After the pass in which the streams write this batch to their sockets (sse-stream.ts).
    setImmediate(() => {
      const now = Date.now();
      for (const d of delivered)
        for (const surface of surfaces) {
          const span = startSpan('murmur.deliver', {
            parent: contextOf(d.trace),
            startTime: Math.min(d.record.receivedAt, now),
            attributes: {
              'murmur.surface': surface,
              'murmur.task_id': d.taskId,
              'murmur.offset': d.record.offset,
            },
          });
          endSpan(span, undefined, now);
        }
    });
  };
};
