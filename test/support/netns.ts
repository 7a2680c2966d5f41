/**
 * A small network of Linux network namespaces for partition tests: one namespace per node (Redis, a
 * capsule, gateway replicas, a client), each with one veth into a bridge that lives in a namespace of
 * its own, on private addresses that exist only inside them. A cut between two nodes is a DROP rule
 * on INPUT in both (packets vanish: no RST, no ICMP, no FIN), a heal removes it.
 *
 * Names are unique per run (parallel runs never meet), every process is started through
 * `ip netns exec` and killed by its pid, and close() removes every namespace, also after a failure
 * and at process exit. Needs root, `ip` (iproute2) and `iptables`; `netnsAvailable()` says whether.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';

export interface NetnsNode {
  readonly name: string;
  /** The namespace's name. */
  readonly ns: string;
  /** Its address on the lab's bridge. */
  readonly ip: string;
}

export interface LabProcess {
  readonly child: ChildProcess;
  /** stdout and stderr lines, in arrival order. */
  readonly output: string[];
  /** Resolves with the first output line matching `re` (already seen or to come), or rejects on exit. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<string>;
  kill(): Promise<void>;
}

const has = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

/** Why partition tests cannot run here, or null when they can. */
export const netnsUnavailable = (): string | null => {
  if (process.platform !== 'linux') return 'not Linux';
  if (process.getuid?.() !== 0) return 'not root';
  if (!has('ip')) return 'no ip (iproute2)';
  if (!has('iptables')) return 'no iptables';
  // Root in a container without CAP_SYS_ADMIN / CAP_NET_ADMIN cannot make namespaces: try one.
  const probe = `mgprobe-${process.pid}`;
  const made = spawnSync('ip', ['netns', 'add', probe], { encoding: 'utf8' });
  if (made.status !== 0) return `cannot create a network namespace: ${made.stderr.trim()}`;
  spawnSync('ip', ['netns', 'del', probe]);
  return null;
};

const run = (args: string[]): void => {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
};

const inNs = (ns: string, cmd: string, args: string[]): void => {
  execFileSync('ip', ['netns', 'exec', ns, cmd, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
};

/** Namespaces of labs still open in this process, removed at exit whatever happened. */
const openLabs = new Set<NetnsLab>();
let exitHook = false;

export class NetnsLab {
  /** `mg` + 5 hex digits: short enough for interface names (15 characters at most). */
  readonly id = `mg${randomBytes(3).toString('hex').slice(0, 5)}`;
  private readonly switchNs = `${this.id}-sw`;
  private readonly nodes: NetnsNode[] = [];
  private readonly procs = new Set<LabProcess>();
  private readonly cuts = new Set<string>();
  private closed = false;

  constructor() {
    openLabs.add(this);
    if (!exitHook) {
      exitHook = true;
      process.once('exit', () => {
        for (const lab of openLabs) lab.closeSync();
      });
    }
    run(['netns', 'add', this.switchNs]);
    run(['-n', this.switchNs, 'link', 'set', 'lo', 'up']);
    run(['-n', this.switchNs, 'link', 'add', 'br0', 'type', 'bridge']);
    run(['-n', this.switchNs, 'link', 'set', 'br0', 'up']);
  }

  /** A new node: its namespace, its veth into the bridge, its address 10.77.0.<n>/24. */
  node(name: string): NetnsNode {
    const index = this.nodes.length + 1;
    const node: NetnsNode = { name, ns: `${this.id}-${name}`, ip: `10.77.0.${index}` };
    run(['netns', 'add', node.ns]);
    this.nodes.push(node);
    const inside = `${this.id}${index}a`;
    const outside = `${this.id}${index}b`;
    // Made inside the switch's namespace with its peer straight in the node's: never in the host's.
    run([
      '-n',
      this.switchNs,
      'link',
      'add',
      outside,
      'type',
      'veth',
      'peer',
      'name',
      inside,
      'netns',
      node.ns,
    ]);
    run(['-n', this.switchNs, 'link', 'set', outside, 'master', 'br0', 'up']);
    run(['-n', node.ns, 'link', 'set', 'lo', 'up']);
    run(['-n', node.ns, 'addr', 'add', `${node.ip}/24`, 'dev', inside]);
    run(['-n', node.ns, 'link', 'set', inside, 'up']);
    return node;
  }

  /** Drop every packet between `a` and `b`, both ways, silently. */
  cut(a: NetnsNode, b: NetnsNode): void {
    const key = [a.ns, b.ns].sort().join(' ');
    if (this.cuts.has(key)) return;
    this.cuts.add(key);
    inNs(a.ns, 'iptables', ['-w', '-I', 'INPUT', '-s', b.ip, '-j', 'DROP']);
    inNs(b.ns, 'iptables', ['-w', '-I', 'INPUT', '-s', a.ip, '-j', 'DROP']);
  }

  heal(a: NetnsNode, b: NetnsNode): void {
    const key = [a.ns, b.ns].sort().join(' ');
    if (!this.cuts.delete(key)) return;
    inNs(a.ns, 'iptables', ['-w', '-D', 'INPUT', '-s', b.ip, '-j', 'DROP']);
    inNs(b.ns, 'iptables', ['-w', '-D', 'INPUT', '-s', a.ip, '-j', 'DROP']);
  }

  /** Remove every cut (a test that failed midway leaves none behind for the next). */
  healAll(): void {
    for (const key of [...this.cuts]) {
      const [a, b] = key.split(' ').map((ns) => this.nodes.find((n) => n.ns === ns)!);
      this.heal(a!, b!);
    }
  }

  /** Start `cmd args` inside `node`'s namespace (from the repository root). */
  spawn(node: NetnsNode, cmd: string, args: string[], env: NodeJS.ProcessEnv = {}): LabProcess {
    const child = spawn('ip', ['netns', 'exec', node.ns, cmd, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    const output: string[] = [];
    const watchers = new Set<(line: string) => void>();
    const onLine = (line: string): void => {
      output.push(line);
      for (const w of [...watchers]) w(line);
    };
    createInterface({ input: child.stdout! }).on('line', onLine);
    createInterface({ input: child.stderr! }).on('line', onLine);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const proc: LabProcess = {
      child,
      output,
      waitFor: (re, timeoutMs = 20_000) =>
        new Promise<string>((resolve, reject) => {
          const seen = output.find((l) => re.test(l));
          if (seen !== undefined) return resolve(seen);
          const timer = setTimeout(() => {
            watchers.delete(watch);
            reject(
              new Error(
                `${node.name}: no line matching ${re} in ${timeoutMs} ms:\n${output.slice(-15).join('\n')}`,
              ),
            );
          }, timeoutMs);
          const watch = (line: string): void => {
            if (!re.test(line)) return;
            clearTimeout(timer);
            watchers.delete(watch);
            resolve(line);
          };
          watchers.add(watch);
          void exited.then(() => {
            if (!watchers.has(watch)) return;
            clearTimeout(timer);
            watchers.delete(watch);
            reject(
              new Error(
                `${node.name}: exited (${child.exitCode}) before ${re}:\n${output.slice(-15).join('\n')}`,
              ),
            );
          });
        }),
      kill: async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGKILL');
          await exited;
        }
        this.procs.delete(proc);
      },
    };
    this.procs.add(proc);
    return proc;
  }

  async close(): Promise<void> {
    await Promise.all([...this.procs].map((p) => p.kill()));
    this.closeSync();
  }

  /** Kill what is left (by pid, only in this lab's namespaces) and delete every namespace. */
  closeSync(): void {
    if (this.closed) return;
    this.closed = true;
    openLabs.delete(this);
    for (const p of this.procs)
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    for (const ns of [...this.nodes.map((n) => n.ns), this.switchNs]) {
      // Anything still running inside (a grandchild): only this lab's own namespace is searched.
      const pids =
        spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).stdout?.trim().split(/\s+/) ?? [];
      for (const pid of pids) if (/^\d+$/.test(pid)) spawnSync('kill', ['-9', pid]);
      spawnSync('ip', ['netns', 'del', ns]);
    }
  }
}

/** The lab's namespaces still present (empty after close()). */
export const labNamespaces = (lab: NetnsLab): string[] =>
  (spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout ?? '')
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => n.startsWith(`${lab.id}-`));
