/**
 * The capsule release lines the simulator can speak (docs/release-lines.md). Each line is
 * a set of switches read by the door, the connections and the task runner, so the wire differences
 * stay in one table instead of `if (release >= …)` scattered through the code. 'spec' is the spec's
 * line (the 0.3 wire plus the 0.4-era heartbeat and artifact) and is the default.
 */

export type SimRelease = 'spec' | '0.4' | '0.5' | '0.6' | '1.0';

export const SIM_RELEASES: readonly SimRelease[] = ['spec', '0.4', '0.5', '0.6', '1.0'];

export interface LineRules {
  release: SimRelease;
  /** The runtime version the card reports (`mur run --json` prints the same). */
  version: string;
  /** 0.4+: one id sequence per session from 1; `rejected` has no id; replay/gap by that sequence. */
  sequenceIds: boolean;
  /** 0.4+: a connection that fell behind gets `lagged {"missed":n}` instead of silent loss. */
  reportsLag: boolean;
  /** 0.5+: exactly one final status per task (reopen and input-timeout are non-final). */
  oneFinal: boolean;
  /** 0.5+: `message/stream` closes on its own task's final only (spec: on any task's final). */
  closesOnOwnFinal: boolean;
  /** 0.5+: queued tasks end `rejected` when the session ends (spec: lost). */
  rejectsQueuedOnEnd: boolean;
  /** 0.5+: the door token needs exactly one Authorization header; the extended card exists. */
  strictAuth: boolean;
  /** 0.6+: `tool-call-started` / `tool-call-progress` before each tool's artifact. */
  toolCallFrames: boolean;
  /** 0.6+: inference turn numbers keep counting across a reopen. */
  turnsAcrossReopen: boolean;
  /** 0.6 only: tasks/cancel of an ended task answers the task unchanged (1.0 is -32002 again). */
  cancelEndedReturnsTask: boolean;
  /** 0.6+: at session shutdown connections drain 500 ms and end without `capsule-closed`. */
  drainsOnShutdown: boolean;
  /** 1.0: A2A 1.0 method names, the `A2A-Version` header, TASK_STATE_* and ROLE_USER. */
  a2a1: boolean;
}

const SPEC: LineRules = {
  release: 'spec',
  version: '0.3.7',
  sequenceIds: false,
  reportsLag: false,
  oneFinal: false,
  closesOnOwnFinal: false,
  rejectsQueuedOnEnd: false,
  strictAuth: false,
  toolCallFrames: false,
  turnsAcrossReopen: false,
  cancelEndedReturnsTask: false,
  drainsOnShutdown: false,
  a2a1: false,
};

const V04: LineRules = { ...SPEC, release: '0.4', version: '0.4.2', sequenceIds: true, reportsLag: true };

const V05: LineRules = {
  ...V04,
  release: '0.5',
  version: '0.5.1',
  oneFinal: true,
  closesOnOwnFinal: true,
  rejectsQueuedOnEnd: true,
  strictAuth: true,
};

const V06: LineRules = {
  ...V05,
  release: '0.6',
  version: '0.6.0',
  toolCallFrames: true,
  turnsAcrossReopen: true,
  cancelEndedReturnsTask: true,
  drainsOnShutdown: true,
};

const V10: LineRules = {
  ...V06,
  release: '1.0',
  version: '1.0.0',
  cancelEndedReturnsTask: false,
  a2a1: true,
};

const LINES: Record<SimRelease, LineRules> = { spec: SPEC, '0.4': V04, '0.5': V05, '0.6': V06, '1.0': V10 };

export const lineRules = (release: SimRelease): LineRules => LINES[release];
