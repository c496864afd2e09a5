/** The status bar item: whether the current notebook runs in the sandbox, and the last cell's cost. */
import { formatSize } from './fileChanges';
import { ModelView } from './modelView';

export class SandboxStatus extends ModelView {
  constructor() {
    super();
    this.addClass('jp-WasmSandboxStatus');
    this.setModel(null);
  }

  get active(): boolean {
    return this.model !== null;
  }

  /** The notebook's kernel is running a cell (or a widget's handler). */
  setBusy(busy: boolean): void {
    this._busy = busy;
    this.render();
  }

  render(): void {
    const model = this.model;
    if (model === null) {
      this.node.textContent = '';
      return;
    }
    const last = model.cells[0];
    const cost = last ? `; last cell ${last.duration_ms.toFixed(0)} ms, ${formatSize(last.memory_peak_bytes)}` : '';
    this.node.textContent = `Sandbox: ${this._busy ? 'running' : 'idle'}${cost}`;
  }

  private _busy = false;
}
