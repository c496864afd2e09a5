/**
 * The status bar item: whether the current notebook runs in the sandbox, and what
 * the last cell cost (its time and how much the guest's memory grew, not the
 * guest's total). It follows the status bar's own conventions (a
 * jp-StatusBar-TextItem, highlighted on hover) and opens the Sandbox panel on click.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { formatDuration, formatSize, formatWork } from './fileChanges';
import { ICellCost, SessionModel, magicsOnly } from './model';
import { ModelView } from './modelView';

/** "1.4 s, +12 MiB"; "27 ms" when the memory did not grow (or the kernel does not say);
 * "3 ms, magics only" for a cell that ran no guest code. */
export function cellCostText(cell: ICellCost): string {
  if (magicsOnly(cell)) {
    return cell.duration_ms > 0 ? `${formatDuration(cell.duration_ms)}, magics only` : 'magics only';
  }
  const growth = cell.memory_growth_bytes;
  return formatDuration(cell.duration_ms) + (growth ? `, +${formatSize(growth)}` : '');
}

/** The item's text: "Sandbox: idle | last cell 1.4 s, +12 MiB". */
export function statusText(busy: boolean, last: ICellCost | undefined): string {
  const state = `Sandbox: ${busy ? 'running' : 'idle'}`;
  return last ? `${state} | last cell ${cellCostText(last)}` : state;
}

/** The item's tooltip: the last cell's time, memory growth, the guest's total memory
 * and instructions, and what a click does. */
export function statusTooltip(busy: boolean, last: ICellCost | undefined): string {
  const lines = [`WebAssembly sandbox: ${busy ? 'running a cell' : 'idle'}`];
  if (last) {
    const host = last.host_ms ? ` (${formatDuration(last.host_ms)} of it in host magics)` : '';
    lines.push(`Last cell [${last.execution_count}]: ${formatDuration(last.duration_ms)}${host}`);
    if (magicsOnly(last)) {
      lines.push('It ran host magics only: no guest code, no memory, no guest work');
    } else {
      const growth = last.memory_growth_bytes;
      const total = last.memory_peak_bytes ? `the guest's memory is ${formatSize(last.memory_peak_bytes)} in all` : '';
      if (growth === null) {
        lines.push(`Memory: ${total || 'not reported'} (this kernel does not report a cell's own growth)`);
      } else {
        lines.push(`Memory: ${growth ? `grew by ${formatSize(growth)}` : 'did not grow'}${total ? `; ${total}` : ''}`);
      }
      lines.push(last.metering === 'fuel'
        ? `Instructions: ${formatWork('fuel', last.fuel_used, last.cpu_ms)} (wasm fuel)`
        : `CPU time: ${formatDuration(last.cpu_ms)}`);
    }
  }
  lines.push('Click to open the Sandbox panel');
  return lines.join('\n');
}

export class SandboxStatus extends ModelView {
  constructor() {
    super();
    this.addClass('jp-WasmSandboxStatus');
    this.addClass('jp-mod-highlighted');
    this._text = document.createElement('span');
    this._text.className = 'jp-StatusBar-TextItem jp-WasmSandboxStatus-text';
    this.node.appendChild(this._text);
    this.node.setAttribute('role', 'button');
    this.node.tabIndex = 0;
    this.node.addEventListener('click', () => this.onClick?.());
    this.node.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        this.onClick?.();
      }
    });
    this.setModel(null);
  }

  /** What a click (or Enter) does: the plugin opens the Sandbox panel. */
  onClick: (() => void) | null = null;

  get active(): boolean {
    return this._shown && this.model !== null;
  }

  /** Whether the settings let the item show at all (schema/session-panel.json). */
  setShown(shown: boolean): void {
    const was = this.active;
    this._shown = shown;
    if (this.active !== was) {
      this._activeChanged.emit();
    }
  }

  /** The status bar asks isActive again on this: the item hides when the kernel shuts down. */
  get activeChanged(): ISignal<this, void> {
    return this._activeChanged;
  }

  setModel(model: SessionModel | null): void {
    const was = this.active;
    super.setModel(model);
    if (this.active !== was) {
      this._activeChanged.emit();
    }
  }

  /** The notebook's kernel is running a cell (or a widget's handler). */
  setBusy(busy: boolean): void {
    this._busy = busy;
    this.render();
  }

  render(): void {
    const model = this.model;
    if (model === null) {
      this._text.textContent = '';
      this.node.title = '';
      return;
    }
    const last = model.cells[0];
    this._text.textContent = statusText(this._busy, last);
    this.node.title = statusTooltip(this._busy, last);
  }

  private _busy = false;
  private _text: HTMLSpanElement;
  private _activeChanged = new Signal<this, void>(this);
  private _shown = true;
}
