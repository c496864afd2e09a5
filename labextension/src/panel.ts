/**
 * The sandbox side panel: the current notebook's session, what the last cells cost,
 * how many files its workspace holds and its limits. The files themselves are the
 * Sandbox files browser's (drivePlugin.ts), JupyterLab's own file browser on the
 * workspace: it lists, uploads, downloads, renames and deletes them; the panel's
 * toolbar opens it. A JupyterLab SidePanel (header, toolbar, content) drawn with the
 * theme's variables, so it follows the light and dark themes. The DOM is built with
 * textContent only: names come from an untrusted notebook.
 */
import { caretDownIcon, folderIcon, LabIcon, refreshIcon, SidePanel, ToolbarButton } from '@jupyterlab/ui-components';
import type { Message } from '@lumino/messaging';
import { Panel, Widget } from '@lumino/widgets';

import { element, folderOf, formatCount, formatDuration, formatSize, formatWork, plural } from './fileChanges';
import { ICellCost, IRewindPreview, ITimelinePoint, SessionModel, magicsOnly } from './model';

export const PANEL_ID = 'wasm-kernel-session-panel';
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

function pointTitle(point: ITimelinePoint): string {
  const when = new Date(point.at * 1000).toLocaleTimeString();
  const what = point.files_only ? 'files only (host magics): the interpreter of the cell before'
    : point.rewind_of !== null ? `a rewind to [${point.rewind_of}]` : 'the interpreter and its files';
  return `Cell [${point.count}] at ${when}: ${what}; keeps ${formatSize(point.bytes)}`;
}

/** The dialog's body: the cells undone, the names they bind, the files that change. */
export function previewNode(preview: IRewindPreview): HTMLElement {
  const node = el('div', 'jp-WasmRewindPreview');
  const cells = preview.cells;
  node.appendChild(el('p', '', cells.length === 0 ? 'Nothing ran after it.' :
    `Goes back past ${plural(cells.length, 'cell')}: ${cells.map(c => `[${c.count}]`).join(' ')}.`));
  const names = el('div', 'jp-WasmRewindPreview-names');
  names.appendChild(el('h3', '', 'Variables'));
  names.appendChild(el('p', preview.names.length ? 'jp-WasmRewindPreview-list' : 'jp-mod-muted',
    preview.names.length ? preview.names.join(', ') : 'No variable is assigned by those cells.'));
  node.appendChild(names);
  const files = el('div', 'jp-WasmRewindPreview-files');
  files.appendChild(el('h3', '', 'Files in /app'));
  if (preview.files === null) {
    files.appendChild(el('p', 'jp-mod-muted', `Not rewound: ${preview.files_off ?? 'files are not kept'}`));
  } else {
    const changes = [
      ...preview.files.created.map(p => `+ ${p}`), ...preview.files.modified.map(p => `~ ${p}`),
      ...preview.files.deleted.map(p => `- ${p}`)
    ];
    if (changes.length === 0) {
      files.appendChild(el('p', 'jp-mod-muted', 'No file changes.'));
    } else {
      const list = el('ul', 'jp-WasmRewindPreview-list');
      for (const change of changes.slice(0, 50)) {
        list.appendChild(el('li', '', change));
      }
      if (changes.length > 50) {
        list.appendChild(el('li', 'jp-mod-muted', `and ${changes.length - 50} more`));
      }
      files.appendChild(list);
    }
  }
  node.appendChild(files);
  node.appendChild(el('p', 'jp-mod-muted', 'The rewind is a point too: you can rewind forward again.'));
  return node;
}

export class SessionPanel extends SidePanel {
  constructor() {
    super({ content: new Panel() });
    this.id = PANEL_ID;
    this.addClass('jp-WasmSessionPanel');
    this.title.caption = 'WebAssembly sandbox: session, cells, files, limits';

    const heading = new Widget({ node: el('h2', 'jp-text-truncated', 'Sandbox') });
    this.header.addWidget(heading);

    this._refreshButton = new ToolbarButton({
      icon: refreshIcon,
      tooltip: 'Refresh the session, its files and its limits',
      onClick: () => void this.model?.refresh()
    });
    this._filesButton = new ToolbarButton({
      icon: folderIcon,
      tooltip: 'Show the files in the Sandbox files browser, which uploads, downloads, renames and deletes them',
      onClick: () => this.onShowFiles?.()
    });
    this._refreshButton.addClass('jp-WasmSessionPanel-refresh');
    this._filesButton.addClass('jp-WasmSessionPanel-showFiles');
    this.toolbar.addItem('files', this._filesButton);
    this.toolbar.addItem('refresh', this._refreshButton);

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
    this._filesButton.enabled = model !== null && this.onShowFiles !== null;
    const body = this._body.node;
    body.textContent = '';
    if (model === null) {
      body.appendChild(el('p', 'jp-WasmSessionPanel-none', this._why));
      return;
    }
    if (model.error !== null) {
      body.appendChild(el('p', 'jp-WasmSessionPanel-error', model.error));
    }
    const info = model.info;
    if (info === null) {
      body.appendChild(el('p', 'jp-WasmSessionPanel-none', 'Waiting for the kernel...'));
      return;
    }
    body.appendChild(this._section('session', 'Session', this._facts(model)));
    body.appendChild(this._section('cells', 'Last cells', this._cells(model)));
    body.appendChild(this._section('timeline', 'Timeline', this._timeline(model), String(model.timeline.length)));
    body.appendChild(this._section('files', 'Files in /app', this._files(model), String(model.files.length)));
    body.appendChild(this._section('limits', 'Limits', this._limits(model)));
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

  /** The points %rewind can go back to, newest first, each with "Rewind here". */
  private _timeline(model: SessionModel): HTMLElement {
    const section = el('div', 'jp-WasmSessionPanel-timeline');
    const points = model.timeline;
    if (points.length === 0) {
      section.appendChild(el('p', 'jp-WasmSessionPanel-empty', model.timelineNote ?? 'No points yet: each cell makes one.'));
      return section;
    }
    if (model.timelineNote) {
      section.appendChild(el('p', 'jp-WasmSessionPanel-cut', `Files are not kept: ${model.timelineNote}`));
    }
    const list = el('ol', 'jp-WasmSessionPanel-points');
    [...points].reverse().forEach((point, n) => {
      const item = el('li', 'jp-WasmSessionPanel-point');
      item.dataset.executionCount = String(point.count);
      item.title = pointTitle(point);
      item.appendChild(el('span', 'jp-WasmSessionPanel-pointCount', `[${point.count}]`));
      item.appendChild(el('code', 'jp-WasmSessionPanel-pointLine', point.first_line || '(empty)'));
      if (n === 0) {
        item.appendChild(el('span', 'jp-WasmSessionPanel-pointNow jp-mod-muted', 'now'));
      } else if (this.onRewind !== null && this.confirmRewind !== null) {
        const button = el('button', 'jp-Button jp-mod-styled jp-mod-minimal jp-WasmSessionPanel-rewind', 'Rewind here');
        button.title = `Put the interpreter and the workspace's files back as they were just after cell [${point.count}]`;
        button.addEventListener('click', () => void this._askRewind(model, point));
        item.appendChild(button);
      }
      list.appendChild(item);
    });
    section.appendChild(list);
    return section;
  }

  /** The dialog: what the rewind changes, then the rewind (a `%rewind N` cell) if agreed. */
  private async _askRewind(model: SessionModel, point: ITimelinePoint): Promise<void> {
    let preview: IRewindPreview;
    try {
      preview = await model.preview(point.count);
    } catch (err) {
      this._fail(model, err);
      return;
    }
    const agreed = this.confirmRewind !== null &&
      await this.confirmRewind(`Rewind to just after cell [${point.count}]?`, previewNode(preview));
    if (agreed && this.onRewind !== null) {
      await this.onRewind(point.count);
      void model.refresh();
    }
  }

  /** How many files, and where they are: the Sandbox files browser lists them. */
  private _files(model: SessionModel): HTMLElement {
    const section = el('div', 'jp-WasmSessionPanel-files');
    const files = model.files;
    const bytes = files.reduce((sum, file) => sum + file.size, 0);
    const folders = new Set(files.map(file => folderOf(file.path)).filter(folder => folder !== '')).size;
    section.appendChild(el('p', 'jp-WasmSessionPanel-fileSummary', files.length === 0 ? 'No files yet.' :
      `${plural(files.length, 'file')}, ${formatSize(bytes)}` + (folders ? ` in ${plural(folders, 'folder')}` : '')));
    if (model.filesCut) {
      section.appendChild(el('p', 'jp-WasmSessionPanel-cut', model.filesCut));
    }
    section.appendChild(el('p', 'jp-WasmSessionPanel-driveHint', this.onShowFiles !== null
      ? 'They are in the Sandbox files browser, which uploads, downloads, renames and deletes them: the folder button above opens it.'
      : this.filesElsewhere));
    return section;
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

  /** Runs `%rewind count` on the notebook's kernel (null: this panel cannot). */
  onRewind: ((count: number) => Promise<void>) | null = null;
  /** Asks the user (JupyterLab's dialog, index.ts): true if they agreed. */
  confirmRewind: ((title: string, body: HTMLElement) => Promise<boolean>) | null = null;
  /** Opens the Sandbox files browser on this notebook's workspace (null: there is none here). */
  onShowFiles: (() => void) | null = null;
  /** Why there is no Sandbox files browser here, said where its button would be. */
  filesElsewhere = 'The Sandbox files browser is not available here.';
  protected model: SessionModel | null = null;
  private _why = NO_SANDBOX['no-notebook'];
  private _closedSections = new Set<string>();
  private _body: Widget;
  private _refreshButton: ToolbarButton;
  private _filesButton: ToolbarButton;
}
