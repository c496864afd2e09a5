/**
 * The sandbox side panel: the current notebook's session, its limits, its files
 * (download, delete, upload by drop or picker) and what the last cells cost. The
 * DOM is built with textContent only: file names come from an untrusted notebook.
 */
import { formatSize } from './fileChanges';
import { SessionModel } from './model';
import { ModelView } from './modelView';

export const PANEL_ID = 'wasm-kernel-session-panel';

function el<K extends keyof HTMLElementTagNameMap>(tag: K, className: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export class SessionPanel extends ModelView {
  constructor() {
    super();
    this.id = PANEL_ID;
    this.addClass('jp-WasmSessionPanel');
    this.title.caption = 'WebAssembly sandbox: session, files, limits';
    this.showNone('Open a notebook that runs on "Python (WebAssembly sandbox)".');
  }

  /** No sandbox to show, and why. */
  showNone(why: string): void {
    this.model = null;
    this.node.textContent = '';
    this.node.appendChild(el('p', 'jp-WasmSessionPanel-none', why));
  }

  render(): void {
    const model = this.model;
    if (model === null) {
      return;
    }
    const node = this.node;
    node.textContent = '';
    node.appendChild(el('h3', 'jp-WasmSessionPanel-title', 'Sandbox'));
    if (model.error !== null) {
      node.appendChild(el('p', 'jp-WasmSessionPanel-error', model.error));
    }
    const info = model.info;
    if (info === null) {
      node.appendChild(el('p', 'jp-WasmSessionPanel-none', 'Waiting for the kernel...'));
      return;
    }
    const facts = el('dl', 'jp-WasmSessionPanel-facts');
    for (const [label, value] of [
      ['notebook', info.notebook ?? '(none)'],
      ['session', info.session_id],
      ['workspace', info.workspace],
      ['disk used', info.disk_used ? `${formatSize(info.disk_used.bytes)}, ${info.disk_used.files} files` : '?']
    ]) {
      facts.appendChild(el('dt', '', label));
      facts.appendChild(el('dd', `jp-WasmSessionPanel-${label.replace(' ', '-')}`, value));
    }
    node.appendChild(facts);

    node.appendChild(el('h4', '', 'Limits'));
    const limits = el('table', 'jp-WasmSessionPanel-limits');
    for (const [name, limit] of Object.entries(info.limits)) {
      const row = limits.insertRow();
      row.dataset.limit = name;
      row.insertCell().textContent = name;
      row.insertCell().textContent = limit.shown;
      row.insertCell().textContent = `at most ${limit.at_most_shown}`;
    }
    node.appendChild(limits);

    node.appendChild(el('h4', '', 'Files in /app'));
    node.appendChild(this._dropZone(model));
    const files = el('table', 'jp-WasmSessionPanel-files');
    for (const file of model.files) {
      const row = files.insertRow();
      row.dataset.path = file.path;
      row.insertCell().textContent = file.path + (file.link ? ' (link)' : '');
      row.insertCell().textContent = formatSize(file.size);
      const actions = row.insertCell();
      const download = el('button', 'jp-WasmSessionPanel-download', 'download');
      download.onclick = () => void this._download(model, file.path);
      const remove = el('button', 'jp-WasmSessionPanel-delete', 'delete');
      remove.onclick = () => {
        if (window.confirm(`Delete ${file.path} from the sandbox's workspace?`)) {
          void model.remove(file.path).catch(err => this._fail(model, err));
        }
      };
      actions.append(download, remove);
    }
    node.appendChild(files);
    if (model.filesCut) {
      node.appendChild(el('p', 'jp-WasmSessionPanel-cut', model.filesCut));
    }

    node.appendChild(el('h4', '', 'Last cells'));
    const cells = el('table', 'jp-WasmSessionPanel-cells');
    for (const cell of model.cells) {
      const row = cells.insertRow();
      row.insertCell().textContent = `[${cell.execution_count}]`;
      row.insertCell().textContent = `${cell.duration_ms.toFixed(1)} ms`;
      row.insertCell().textContent = formatSize(cell.memory_peak_bytes);
      row.insertCell().textContent = `${(cell.fuel_used / 1e6).toFixed(1)} M fuel`;
    }
    node.appendChild(cells);
  }

  private _dropZone(model: SessionModel): HTMLElement {
    const zone = el('div', 'jp-WasmSessionPanel-drop', 'Drop files here to upload them to /app, or ');
    const picker = el('input', 'jp-WasmSessionPanel-picker');
    picker.type = 'file';
    picker.multiple = true;
    picker.onchange = () => void this._upload(model, Array.from(picker.files ?? []));
    zone.appendChild(picker);
    zone.ondragover = event => {
      event.preventDefault();
      zone.classList.add('jp-mod-dropping');
    };
    zone.ondragleave = () => zone.classList.remove('jp-mod-dropping');
    zone.ondrop = event => {
      event.preventDefault();
      zone.classList.remove('jp-mod-dropping');
      void this._upload(model, Array.from(event.dataTransfer?.files ?? []));
    };
    return zone;
  }

  private async _upload(model: SessionModel, files: File[]): Promise<void> {
    for (const file of files) {
      try {
        await model.upload(file.name, new Uint8Array(await file.arrayBuffer()));
      } catch (err) {
        this._fail(model, err);
      }
    }
  }

  /** Download `path` through the current session (also for the renderer's links). */
  download(path: string): void {
    if (this.model !== null) {
      void this._download(this.model, path);
    }
  }

  private async _download(model: SessionModel, path: string): Promise<void> {
    try {
      const bytes = await model.download(path);
      const url = URL.createObjectURL(new Blob([bytes]));
      const link = document.createElement('a');
      link.href = url;
      link.download = path.split('/').pop() ?? 'download';
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch (err) {
      this._fail(model, err);
    }
  }

  private _fail(model: SessionModel, err: unknown): void {
    model.error = (err as Error).message;
    this.render();
  }
}
