/**
 * The sandbox side panel: the current notebook's session, what the last cells cost,
 * its files (by folder; download, delete, upload by drop or the toolbar) and its
 * limits. A JupyterLab SidePanel (header, toolbar, content) drawn with the theme's
 * variables, so it follows the light and dark themes. The DOM is built with
 * textContent only: file names come from an untrusted notebook.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import {
  caretDownIcon,
  deleteIcon,
  downloadIcon,
  fileIcon,
  fileUploadIcon,
  folderIcon,
  LabIcon,
  refreshIcon,
  SidePanel,
  ToolbarButton
} from '@jupyterlab/ui-components';
import type { Message } from '@lumino/messaging';
import { Panel, Widget } from '@lumino/widgets';

import {
  element,
  folderLabel,
  folderOf,
  formatCount,
  formatDuration,
  formatSize,
  formatWork,
  plural
} from './fileChanges';
import { ICellCost, IWorkspaceFile, SessionModel, magicsOnly } from './model';

export const PANEL_ID = 'wasm-kernel-session-panel';
/** More files than this: every folder starts collapsed, with a summary line above. */
export const MANY_FILES = 50;
/** Why there is no sandbox to show, and what the panel says then. */
export const NO_SANDBOX = {
  'no-notebook': 'Open a notebook that runs on "Python (WebAssembly sandbox)" to see its sandbox.',
  'no-kernel': 'This notebook has no kernel. Choose "Python (WebAssembly sandbox)" to see its sandbox.',
  'shut-down': 'The kernel is shut down. Start it again to see the sandbox.',
  'other-kernel': "This notebook's kernel is not the WebAssembly sandbox."
};
export type NoSandbox = keyof typeof NO_SANDBOX;

const el = element;

/** A LabIcon in a span of its own (given a container, LabIcon replaces its content and class). */
function iconSpan(icon: LabIcon, className: string): HTMLElement {
  return icon.element({ tag: 'span', className });
}

/** A small icon button in JupyterLab's own style (ui-components' Button, minimal). */
function iconButton(icon: LabIcon, className: string, title: string, onClick: (event: MouseEvent) => void): HTMLButtonElement {
  const button = el('button', `jp-Button jp-mod-minimal jp-mod-small jp-WasmSessionPanel-iconButton ${className}`);
  button.type = 'button';
  button.title = title;
  button.setAttribute('aria-label', title);
  button.appendChild(iconSpan(icon, 'jp-WasmSessionPanel-buttonIcon'));
  button.onclick = event => {
    event.preventDefault();
    event.stopPropagation();
    onClick(event);
  };
  return button;
}

/** "1.4 s (0.2 s in host magics), memory +12 MiB of 561 MiB, 1.2 s CPU" (or "3.6 G instructions"). */
function cellTitle(cell: ICellCost): string {
  const host = cell.host_ms ? ` (${formatDuration(cell.host_ms)} in host magics)` : '';
  const parts = [`Cell [${cell.execution_count}]: ${formatDuration(cell.duration_ms)}${host}`];
  if (magicsOnly(cell)) {
    parts.push('host magics only');
  } else {
    const total = cell.memory_peak_bytes ? `the guest's memory is ${formatSize(cell.memory_peak_bytes)} in all` : '';
    if (cell.memory_growth_bytes === null) {
      parts.push(total || 'memory not reported');
    } else {
      parts.push(`memory ${cell.memory_growth_bytes ? `grew by ${formatSize(cell.memory_growth_bytes)}` : 'did not grow'}` +
        (total ? `; ${total}` : ''));
    }
    parts.push(formatWork(cell.metering, cell.fuel_used, cell.cpu_ms));
  }
  if (cell.network_requests) {
    const n = cell.network_requests;
    parts.push(`fetched ${formatSize(cell.network_bytes ?? 0)} in ${n} request${n === 1 ? '' : 's'}`);
  }
  return parts.join('\n');
}

interface IFolderGroup {
  folder: string;
  files: IWorkspaceFile[];
  bytes: number;
}

/** The files by the folder they are in, the top level ('') first, then by name. */
export function groupByFolder(files: IWorkspaceFile[]): IFolderGroup[] {
  const groups = new Map<string, IFolderGroup>();
  for (const file of files) {
    const folder = folderOf(file.path);
    let group = groups.get(folder);
    if (group === undefined) {
      group = { folder, files: [], bytes: 0 };
      groups.set(folder, group);
    }
    group.files.push(file);
    group.bytes += file.size;
  }
  return Array.from(groups.values()).sort((a, b) =>
    a.folder === '' ? -1 : b.folder === '' ? 1 : a.folder.localeCompare(b.folder)
  );
}

export class SessionPanel extends SidePanel {
  constructor() {
    super({ content: new Panel() });
    this.id = PANEL_ID;
    this.addClass('jp-WasmSessionPanel');
    this.title.caption = 'WebAssembly sandbox: session, files, limits';

    const heading = new Widget({ node: el('h2', 'jp-text-truncated', 'Sandbox') });
    this.header.addWidget(heading);

    this._refreshButton = new ToolbarButton({
      icon: refreshIcon,
      tooltip: 'Refresh the session, its files and its limits',
      onClick: () => void this.model?.refresh()
    });
    this._uploadButton = new ToolbarButton({
      icon: fileUploadIcon,
      tooltip: 'Upload files to /app (or drop them on the file list)',
      onClick: () => this._picker.click()
    });
    this._refreshButton.addClass('jp-WasmSessionPanel-refresh');
    this._uploadButton.addClass('jp-WasmSessionPanel-upload');
    this.toolbar.addItem('upload', this._uploadButton);
    this.toolbar.addItem('refresh', this._refreshButton);

    this._picker = el('input', 'jp-WasmSessionPanel-picker');
    this._picker.type = 'file';
    this._picker.multiple = true;
    this._picker.hidden = true;
    this._picker.onchange = () => {
      const chosen = Array.from(this._picker.files ?? []);
      this._picker.value = '';
      if (this.model !== null) {
        void this._upload(this.model, chosen);
      }
    };
    this.node.appendChild(this._picker);

    this._body = new Widget();
    this._body.addClass('jp-WasmSessionPanel-body');
    this.addWidget(this._body);
    this.showNone('no-notebook');
  }

  /** The notebook's sandbox to show (null: none; showNone says why). */
  setModel(model: SessionModel | null): void {
    // A model replaced (another notebook, a restart) draws here no more.
    this.model?.changed.disconnect(this._redraw, this);
    this.model = model;
    this._notice = null;
    model?.changed.connect(this._redraw, this);
    this.render();
  }

  private _redraw(): void {
    this.render();
  }

  /** No sandbox to show, and why. */
  showNone(why: NoSandbox): void {
    this.model = null;
    this._why = NO_SANDBOX[why];
    this.render();
  }

  render(): void {
    const model = this.model;
    this._refreshButton.enabled = model !== null;
    this._uploadButton.enabled = model !== null;
    const body = this._body.node;
    const fileScroll = body.querySelector('.jp-WasmSessionPanel-fileList')?.scrollTop ?? 0;
    body.textContent = '';
    if (model === null) {
      body.appendChild(el('p', 'jp-WasmSessionPanel-none', this._why));
      return;
    }
    if (model.error !== null) {
      body.appendChild(el('p', 'jp-WasmSessionPanel-error', model.error));
    }
    if (this._notice !== null) {
      body.appendChild(el('p', 'jp-WasmSessionPanel-notice', this._notice));
    }
    const info = model.info;
    if (info === null) {
      body.appendChild(el('p', 'jp-WasmSessionPanel-none', 'Waiting for the kernel...'));
      return;
    }
    body.appendChild(this._section('session', 'Session', this._facts(model)));
    body.appendChild(this._section('cells', 'Last cells', this._cells(model)));
    const files = this._section('files', 'Files in /app', this._files(model), String(model.files.length));
    this._dropTarget(files, model);
    body.appendChild(files);
    body.appendChild(this._section('limits', 'Limits', this._limits(model)));
    const list = body.querySelector('.jp-WasmSessionPanel-fileList');
    if (list !== null && fileScroll) {
      list.scrollTop = fileScroll;
    }
  }

  /** Download `path` through the current session (also for the renderer's links);
   * `fallback` instead of an error when the workspace has no such file (an output's link). */
  download(path: string, fallback?: () => void): void {
    if (this.model !== null) {
      void this._download(this.model, path, fallback);
    } else {
      fallback?.();
    }
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this.model?.refresh(); // what changed while the panel was closed
  }

  /** A collapsible section, open unless the user closed it (remembered across redraws). */
  private _section(key: string, title: string, content: HTMLElement, badge?: string): HTMLDetailsElement {
    const section = el('details', `jp-WasmSessionPanel-section jp-WasmSessionPanel-section-${key}`);
    section.open = this._closedSections.has(key) === false;
    const summary = el('summary', 'jp-WasmSessionPanel-sectionTitle');
    summary.appendChild(iconSpan(caretDownIcon, 'jp-WasmSessionPanel-caret'));
    summary.appendChild(el('span', 'jp-WasmSessionPanel-sectionLabel', title));
    if (badge !== undefined) {
      summary.appendChild(el('span', 'jp-WasmSessionPanel-badge', badge));
    }
    section.appendChild(summary);
    section.appendChild(content);
    section.addEventListener('toggle', () => {
      if (section.open) {
        this._closedSections.delete(key);
      } else {
        this._closedSections.add(key);
      }
    });
    return section;
  }

  private _facts(model: SessionModel): HTMLElement {
    const info = model.info!;
    const facts = el('dl', 'jp-WasmSessionPanel-facts');
    const used = info.disk_used;
    const disk = info.limits.disk?.value ? ` of ${info.limits.disk.shown}` : '';
    const entries = info.limits.files?.value ? ` of ${info.limits.files.shown}` : '';
    // The quota counts /app and /tmp, folders included: more than the files listed
    // below (the guest's /tmp holds IPython's profile and matplotlib's font list).
    for (const [label, name, value, title] of [
      ['notebook', 'notebook', info.notebook ?? '(none)', ''],
      ['session', 'session', info.session_id, ''],
      ['workspace', 'workspace', info.workspace, ''],
      ['disk used (/app, /tmp)', 'quota-used', used ? `${formatSize(used.bytes)}${disk}` : '?',
        'What the disk quota counts in /app and /tmp, folders included: more than the files listed below'],
      ['files and folders', 'quota-entries', used ? `${used.files}${entries}` : '?',
        'Files and folders the disk quota counts in /app and /tmp']
    ]) {
      facts.appendChild(el('dt', '', label));
      const dd = el('dd', `jp-WasmSessionPanel-${name}`, value);
      dd.title = title ? `${value}: ${title.toLowerCase()}` : value;
      facts.appendChild(dd);
    }
    return facts;
  }

  private _cells(model: SessionModel): HTMLElement {
    if (model.cells.length === 0) {
      return el('p', 'jp-WasmSessionPanel-empty', 'No cell has run in this kernel yet.');
    }
    const table = el('table', 'jp-WasmSessionPanel-table jp-WasmSessionPanel-cells');
    const head = table.createTHead().insertRow();
    for (const [title, tip] of [
      ['Cell', 'The execution count'],
      ['Time', "The cell's whole time, host magics included"],
      ['Memory', "How much the guest's memory grew during the cell"],
      ['Work', 'The CPU time the guest used (time metering), or the WebAssembly instructions it ran (fuel metering)']
    ]) {
      const th = el('th', '', title);
      th.title = tip;
      head.appendChild(th);
    }
    const body = table.createTBody();
    for (const cell of model.cells) {
      const row = body.insertRow();
      row.title = cellTitle(cell);
      row.dataset.executionCount = String(cell.execution_count);
      row.insertCell().textContent = `[${cell.execution_count}]`;
      row.insertCell().textContent = formatDuration(cell.duration_ms);
      const memory = row.insertCell();
      const instructions = row.insertCell();
      if (magicsOnly(cell)) {
        memory.textContent = '–';
        instructions.textContent = 'magics';
        instructions.className = 'jp-mod-muted';
      } else {
        const growth = cell.memory_growth_bytes;
        // Older kernels report only the guest's total memory: shown as such, muted.
        memory.textContent = growth === null ? formatSize(cell.memory_peak_bytes) : growth ? `+${formatSize(growth)}` : '–';
        memory.className = growth === null ? 'jp-mod-muted' : '';
        instructions.textContent = cell.metering === 'fuel' ? formatCount(cell.fuel_used) : formatDuration(cell.cpu_ms);
      }
    }
    return table;
  }

  private _files(model: SessionModel): HTMLElement {
    const section = el('div', 'jp-WasmSessionPanel-files');
    section.appendChild(el('div', 'jp-WasmSessionPanel-dropHint', 'Drop files here to upload them to /app'));
    const files = model.files;
    if (files.length === 0) {
      section.appendChild(el('p', 'jp-WasmSessionPanel-empty', 'No files yet.'));
    }
    const groups = groupByFolder(files);
    const many = files.length > MANY_FILES;
    if (many) {
      const bytes = groups.reduce((sum, group) => sum + group.bytes, 0);
      const folders = groups.filter(group => group.folder !== '').length;
      section.appendChild(el('p', 'jp-WasmSessionPanel-fileSummary',
        `${plural(files.length, 'file')}, ${formatSize(bytes)}` + (folders ? ` in ${plural(folders, 'folder')}` : '')));
      section.appendChild(el('p', 'jp-WasmSessionPanel-driveHint',
        'The whole workspace is also in the file browser, in the "Sandbox" drive.'));
    }
    const list = el('div', 'jp-WasmSessionPanel-fileList');
    for (const group of groups) {
      if (group.folder === '' && !many) {
        for (const file of group.files) {
          list.appendChild(this._fileRow(model, file, file.path));
        }
      } else {
        list.appendChild(this._folder(model, group, !many));
      }
    }
    section.appendChild(list);
    if (model.filesCut) {
      section.appendChild(el('p', 'jp-WasmSessionPanel-cut', model.filesCut));
    }
    return section;
  }

  /** A folder's files behind its name, drawn when it is first opened. */
  private _folder(model: SessionModel, group: IFolderGroup, openByDefault: boolean): HTMLElement {
    const details = el('details', 'jp-WasmSessionPanel-folder');
    details.dataset.folder = group.folder;
    details.open = this._folderOpen.get(group.folder) ?? openByDefault;
    const summary = el('summary', 'jp-WasmSessionPanel-folderTitle');
    summary.appendChild(iconSpan(caretDownIcon, 'jp-WasmSessionPanel-caret'));
    summary.appendChild(iconSpan(folderIcon, 'jp-WasmSessionPanel-fileIcon'));
    const name = el('span', 'jp-WasmSessionPanel-name', folderLabel(group.folder));
    name.title = group.folder === '' ? 'The top of /app' : `/app/${group.folder}`;
    summary.appendChild(name);
    summary.appendChild(el('span', 'jp-WasmSessionPanel-size', `${plural(group.files.length, 'file')}, ${formatSize(group.bytes)}`));
    if (group.folder !== '') {
      summary.appendChild(iconButton(deleteIcon, 'jp-WasmSessionPanel-delete', `Delete ${group.folder} and its files`,
        () => void this._confirmDelete(model, group.folder, true, group.files.length)));
    }
    details.appendChild(summary);
    const fill = (): void => {
      if (details.open && details.childElementCount === 1) {
        for (const file of group.files) {
          details.appendChild(this._fileRow(model, file, file.path.slice(group.folder ? group.folder.length + 1 : 0)));
        }
      }
    };
    details.addEventListener('toggle', () => {
      this._folderOpen.set(group.folder, details.open);
      fill();
    });
    fill();
    return details;
  }

  private _fileRow(model: SessionModel, file: IWorkspaceFile, shown: string): HTMLElement {
    const row = el('div', 'jp-WasmSessionPanel-file');
    row.dataset.path = file.path;
    row.appendChild(iconSpan(fileIcon, 'jp-WasmSessionPanel-fileIcon'));
    const name = el('span', 'jp-WasmSessionPanel-name', shown);
    name.title = `${file.path}${file.link ? ' (a link)' : ''}\n${formatSize(file.size)}, modified ${file.modified}`;
    if (file.link) {
      name.classList.add('jp-mod-link');
    }
    row.appendChild(name);
    row.appendChild(el('span', 'jp-WasmSessionPanel-size', formatSize(file.size)));
    row.appendChild(iconButton(downloadIcon, 'jp-WasmSessionPanel-download', `Download ${file.path}`,
      () => void this._download(model, file.path)));
    row.appendChild(iconButton(deleteIcon, 'jp-WasmSessionPanel-delete', `Delete ${file.path}`,
      () => void this._confirmDelete(model, file.path, false, 1)));
    return row;
  }

  private _limits(model: SessionModel): HTMLElement {
    const table = el('table', 'jp-WasmSessionPanel-table jp-WasmSessionPanel-limits');
    const head = table.createTHead().insertRow();
    for (const title of ['Limit', 'Value', 'At most']) {
      head.appendChild(el('th', '', title));
    }
    const body = table.createTBody();
    const metering = model.info!.metering;
    if (metering) {
      const row = body.insertRow();
      row.dataset.limit = 'metering';
      row.title = metering === 'time'
        ? 'metering: time. A cell is bounded by its CPU time (cpu) and deadline; the operator chooses the metering'
        : 'metering: fuel. A cell is bounded by the WebAssembly instructions it runs (fuel); the operator chooses the metering';
      row.insertCell().textContent = 'metering';
      row.insertCell().textContent = metering;
      row.insertCell().textContent = 'operator';
    }
    for (const [name, limit] of Object.entries(model.info!.limits)) {
      const row = body.insertRow();
      row.dataset.limit = name;
      row.title = `${name}: ${limit.shown}; %limits can set it up to ${limit.at_most_shown}`;
      row.insertCell().textContent = name;
      row.insertCell().textContent = limit.shown;
      row.insertCell().textContent = limit.at_most_shown;
    }
    return table;
  }

  private _dropTarget(zone: HTMLElement, model: SessionModel): void {
    zone.ondragover = event => {
      if (event.dataTransfer?.types.includes('Files')) {
        event.preventDefault();
        zone.classList.add('jp-mod-dropping');
      }
    };
    zone.ondragleave = event => {
      if (!zone.contains(event.relatedTarget as Node | null)) {
        zone.classList.remove('jp-mod-dropping');
      }
    };
    zone.ondrop = event => {
      event.preventDefault();
      zone.classList.remove('jp-mod-dropping');
      void this._upload(model, Array.from(event.dataTransfer?.files ?? []));
    };
  }

  private async _confirmDelete(model: SessionModel, path: string, folder: boolean, files: number): Promise<void> {
    const result = await showDialog({
      title: folder ? 'Delete folder' : 'Delete file',
      body: folder
        ? `Delete the folder "${path}" and the ${plural(files, 'file')} in it from the sandbox's workspace (/app)?`
        : `Delete "${path}" from the sandbox's workspace (/app)?`,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete' })]
    });
    if (!result.button.accept) {
      return;
    }
    try {
      await model.remove(path, folder);
    } catch (err) {
      this._fail(model, err);
    }
  }

  private async _upload(model: SessionModel, files: File[]): Promise<void> {
    for (const [index, file] of files.entries()) {
      this._notice = `Uploading ${file.name}` + (files.length > 1 ? ` (${index + 1} of ${files.length})...` : '...');
      this.render();
      try {
        await model.upload(file.name, new Uint8Array(await file.arrayBuffer()));
      } catch (err) {
        model.error = (err as Error).message;
      }
    }
    this._notice = null;
    this.render();
  }

  private async _download(model: SessionModel, path: string, fallback?: () => void): Promise<void> {
    try {
      const bytes = await model.download(path);
      const url = URL.createObjectURL(new Blob([bytes as BlobPart]));
      const link = document.createElement('a');
      link.href = url;
      link.download = path.split('/').pop() ?? 'download';
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch (err) {
      if (fallback !== undefined && /no such file/.test((err as Error).message)) {
        fallback(); // not the workspace's: the server's file, as JupyterLab linked it
        return;
      }
      this._fail(model, err);
    }
  }

  private _fail(model: SessionModel, err: unknown): void {
    model.error = (err as Error).message;
    this.render();
  }

  protected model: SessionModel | null = null;
  private _why = NO_SANDBOX['no-notebook'];
  private _notice: string | null = null;
  private _closedSections = new Set<string>();
  private _folderOpen = new Map<string, boolean>();
  private _body: Widget;
  private _picker: HTMLInputElement;
  private _refreshButton: ToolbarButton;
  private _uploadButton: ToolbarButton;
}
