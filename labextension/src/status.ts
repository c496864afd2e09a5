/** The status bar item: whether the current notebook runs in the sandbox, and the last cell's cost. */
import { Widget } from '@lumino/widgets';

import { formatSize } from './fileChanges';
import { SessionModel } from './model';

export class SandboxStatus extends Widget {
  constructor() {
    super();
    this.addClass('jp-WasmSandboxStatus');
    this.setModel(null);
  }

  get active(): boolean {
    return this._model !== null;
  }

  /** The notebook's kernel is running a cell (or a widget's handler). */
  setBusy(busy: boolean): void {
    this._busy = busy;
    this.render();
  }

  setModel(model: SessionModel | null): void {
    this._model = model;
    model?.onChange(() => {
      if (this._model === model) {
        this.render();
      }
    });
    this.render();
  }

  render(): void {
    const model = this._model;
    if (model === null) {
      this.node.textContent = '';
      return;
    }
    const last = model.cells[0];
    const cost = last ? `; last cell ${last.duration_ms.toFixed(0)} ms, ${formatSize(last.memory_peak_bytes)}` : '';
    this.node.textContent = `Sandbox: ${this._busy ? 'running' : 'idle'}${cost}`;
  }

  private _model: SessionModel | null = null;
  private _busy = false;
}
