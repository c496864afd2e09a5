/**
 * The session panel's model: requests to the kernel's `wasm_kernel.session` comm
 * target (answered on the host, see wasm_kernel/kernel/session_comm.py) and the
 * state they fill in. It knows the comm only through a small interface, so it can
 * be tested without a kernel.
 */
import { ISignal, Signal } from '@lumino/signaling';

export interface ICommLike {
  send(data: Record<string, unknown>): void;
}

export interface ILimit {
  value: number | null;
  at_most: number | null;
  shown: string;
  at_most_shown: string;
}

export interface ISessionInfo {
  session_id: string;
  notebook: string | null;
  workspace: string;
  /** What bounds a cell's work: CPU time ('time') or wasm instructions ('fuel'); absent from older kernels. */
  metering?: 'time' | 'fuel';
  limits: Record<string, ILimit>;
  disk_used: { bytes: number; files: number } | null;
  /** The kernel's last cells, newest first, as its `cell` events (absent from older kernels). */
  cells?: { execution_count: number; cost?: Record<string, unknown> }[];
}

export interface IWorkspaceFile {
  path: string;
  size: number;
  link: boolean;
  modified: string;
}

export interface ICellCost {
  execution_count: number;
  /** What bounded the cell: CPU time ('time', the default) or wasm fuel ('fuel'). */
  metering: 'time' | 'fuel';
  /** Wasm fuel: about one per WebAssembly instruction the guest ran (0 in time metering). */
  fuel_used: number;
  /** The CPU time the guest's turns used; null from kernels that do not say. */
  cpu_ms: number | null;
  /** The guest's whole linear memory after the cell (it only grows): not the cell's own. */
  memory_peak_bytes: number;
  /** The cell's whole time, host magics included (older kernels: the guest's turns only). */
  duration_ms: number;
  /** How much the guest's memory grew during the cell; null from kernels that do not say. */
  memory_growth_bytes: number | null;
  /** The part of duration_ms spent in host magics; null from kernels that do not say. */
  host_ms: number | null;
  /** Requests made and response bytes read through the network door; null from kernels that do not say. */
  network_requests?: number | null;
  network_bytes?: number | null;
}

/** The guest work a cell did, in its metering's unit: instructions or CPU milliseconds. */
export function guestWork(cell: ICellCost): number {
  return cell.metering === 'fuel' ? cell.fuel_used : cell.cpu_ms ?? 0;
}

/** The cell ran no guest code: only host magics (%limits, %files, ...). */
export function magicsOnly(cell: ICellCost): boolean {
  return guestWork(cell) === 0 && (cell.host_ms === null || cell.host_ms >= cell.duration_ms);
}

function optionalNumber(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}

/** A cell's cost from the kernel's "cell" event (or execute_reply metadata.sandbox). */
export function parseCellCost(executionCount: unknown, cost: Record<string, unknown>): ICellCost {
  return {
    execution_count: Number(executionCount),
    // Kernels from before the two meterings counted fuel only, and said no metering.
    metering: cost.metering === 'time' || (cost.metering === undefined && cost.fuel_used === undefined) ? 'time' : 'fuel',
    fuel_used: optionalNumber(cost.fuel_used) ?? 0,
    cpu_ms: optionalNumber(cost.cpu_ms),
    memory_peak_bytes: optionalNumber(cost.memory_peak_bytes) ?? 0,
    duration_ms: optionalNumber(cost.duration_ms) ?? 0,
    memory_growth_bytes: optionalNumber(cost.memory_growth_bytes),
    host_ms: optionalNumber(cost.host_ms),
    network_requests: optionalNumber(cost.network_requests),
    network_bytes: optionalNumber(cost.network_bytes)
  };
}


const KEPT_CELLS = 10;
/** The kernel answers the panel between cells: a request still unanswered after this
 * long ends with a message instead of a spinner that never stops. */
export const REQUEST_TIMEOUT_MS = 30_000;

/** One point of the timeline (the kernel's `timeline` op): a cell %rewind can go back to. */
export interface ITimelinePoint {
  count: number;
  at: number; // seconds since the epoch
  first_line: string;
  bytes: number;
  files_only: boolean;
  rewind_of: number | null;
}

/** What a rewind would change (the kernel's `preview` op), before the user agrees. */
export interface IRewindPreview {
  count: number;
  first_line: string;
  cells: { count: number; first_line: string }[];
  names: string[];
  files: { created: string[]; modified: string[]; deleted: string[] } | null;
  files_off: string | null;
}

export class SessionModel {
  info: ISessionInfo | null = null;
  /** The points, oldest first; empty until a cell ran (or when the session keeps none). */
  timeline: ITimelinePoint[] = [];
  timelineNote: string | null = null;
  files: IWorkspaceFile[] = [];
  filesCut: string | null = null;
  cells: ICellCost[] = [];
  error: string | null = null;

  constructor(comm: ICommLike, timeoutMs: number = REQUEST_TIMEOUT_MS) {
    this._comm = comm;
    this._timeoutMs = timeoutMs;
  }

  /** Called with every comm message's data from the kernel. */
  handle(data: unknown): void {
    if (typeof data !== 'object' || data === null) {
      return;
    }
    const message = data as Record<string, unknown>;
    if (message.event === 'cell') {
      this._onCell(message);
      return;
    }
    const pending = this._pending.get(message.id as number);
    if (pending !== undefined) {
      this._pending.delete(message.id as number);
      clearTimeout(pending.timer);
      if (message.ok === true) {
        pending.resolve(message);
      } else {
        pending.reject(new Error(String(message.error ?? 'the kernel refused the request')));
      }
    }
  }

  request(op: string, args: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const id = ++this._lastId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this._pending.delete(id);
        reject(new Error(`the kernel did not answer within ${Math.round(this._timeoutMs / 1000)} s ` +
          '(it may be busy running a cell); try again when it is idle'));
      }, this._timeoutMs);
      this._pending.set(id, { resolve, reject, timer });
      this._comm.send({ id, op, ...args });
    });
  }

  /** Ask for the session and the listing again. */
  async refresh(): Promise<void> {
    try {
      this.info = (await this.request('info')) as unknown as ISessionInfo;
      if (Array.isArray(this.info.cells)) {
        // The kernel's history, so a panel bound later (a notebook switch) still shows it.
        this.cells = this.info.cells
          .map(cell => parseCellCost(cell.execution_count, (cell.cost ?? {}) as Record<string, unknown>))
          .slice(0, KEPT_CELLS);
      }
      const listing = await this.request('files');
      this.files = listing.files as IWorkspaceFile[];
      this.filesCut = (listing.cut as string | null) ?? null;
      // The points come with the info (one round trip): null before a cell ran.
      const timeline = (this.info as unknown as { timeline?: Record<string, unknown> | null }).timeline ?? null;
      this.timeline = timeline ? (timeline.points as ITimelinePoint[]) : [];
      this.timelineNote = timeline ? ((timeline.files_off as string | null) ?? null) : null;
      this.error = null;
    } catch (err) {
      this.error = (err as Error).message;
    }
    this._emit();
  }

  async download(path: string): Promise<Uint8Array> {
    const answer = await this.request('read', { path });
    return base64ToBytes(answer.data as string);
  }

  /** What `%rewind count` would change, changing nothing. */
  async preview(count: number): Promise<IRewindPreview> {
    return (await this.request('preview', { count })) as unknown as IRewindPreview;
  }

  async setLimits(changes: Record<string, string>): Promise<void> {
    this.info = (await this.request('limits', { set: changes })) as unknown as ISessionInfo;
    this._emit();
  }

  /** Emitted when what the model holds changed: its info, its files, its cells. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Drop what is pending: the comm closed (the kernel restarted or went away). */
  dispose(): void {
    for (const pending of this._pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(new Error('the kernel went away'));
    }
    this._pending.clear();
    Signal.clearData(this);
  }

  private _onCell(message: Record<string, unknown>): void {
    const cost = (message.cost ?? {}) as Record<string, unknown>;
    this.cells = [parseCellCost(message.execution_count, cost), ...this.cells].slice(0, KEPT_CELLS);
    this._emit(); // the status bar shows the cost now, not after the kernel answers
    // The cell may have written files: the disk use and the listing are asked for again.
    void this.refresh();
  }

  private _emit(): void {
    this._changed.emit();
  }

  private _comm: ICommLike;
  private _timeoutMs: number;
  private _lastId = 0;
  private _pending = new Map<
    number,
    { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void; timer: ReturnType<typeof setTimeout> }
  >();
  private _changed = new Signal<this, void>(this);
}

export function base64ToBytes(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) {
    bytes[i] = binary.charCodeAt(i);
  }
  return bytes;
}
