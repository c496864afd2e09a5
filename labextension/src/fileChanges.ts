/**
 * The per-cell file-change list the kernel sends as
 * application/vnd.wasm-kernel.file-changes+json, drawn as a compact table; a long
 * one (a cell that wrote 300 files) as counts per folder, with the list behind a
 * collapsed <details>. Also the human units the panel and status bar share.
 *
 * The data comes from a notebook, which may be untrusted: it is checked for shape,
 * and every string reaches the DOM through textContent, never as HTML.
 */

import { downloadRequested } from './events';

export type ChangeKind = 'created' | 'modified' | 'deleted';

export interface IFileChange {
  path: string;
  size: number | null;
}

/** One folder's line of the kernel's summary (or of the one computed here). */
export interface IFolderSummary {
  folder: string;
  created: number;
  modified: number;
  deleted: number;
  bytes: number;
}

/** What the kernel adds to the lists: counts per kind and per top-level folder, the
 * biggest folders first (folder '' holds the files directly in the workspace). */
export interface IChangeSummary {
  total: number;
  folders: IFolderSummary[];
  more_folders: number;
  /** The counts per kind over every change (the lists may be cut); null: not sent. */
  kinds: Record<ChangeKind, number> | null;
}

export interface IFileChanges {
  created: IFileChange[];
  modified: IFileChange[];
  deleted: IFileChange[];
  summary?: IChangeSummary;
}

const KINDS: ChangeKind[] = ['created', 'modified', 'deleted'];
/** Up to this many changes are listed as they are; more are summarised by folder. */
export const SUMMARY_AFTER = 20;
/** The folders a summary names before "and N more folders". */
const SUMMARY_FOLDERS = 10;
/** The rows the expandable full list draws at most. */
const MAX_ROWS = 200;

/** The changes in `data`, or null if it is not what the kernel sends. */
export function parseFileChanges(data: unknown): IFileChanges | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const source = data as Record<string, unknown>;
  const parsed: IFileChanges = { created: [], modified: [], deleted: [] };
  for (const kind of KINDS) {
    const entries = source[kind] ?? [];
    if (!Array.isArray(entries)) {
      return null;
    }
    for (const entry of entries) {
      if (typeof entry !== 'object' || entry === null || typeof entry.path !== 'string') {
        return null;
      }
      const size = typeof entry.size === 'number' && entry.size >= 0 ? entry.size : null;
      parsed[kind].push({ path: entry.path, size: kind === 'deleted' ? null : size });
    }
  }
  const summary = parseSummary(source.summary);
  if (summary !== null) {
    parsed.summary = summary;
  }
  return parsed;
}

function count(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}

/** The kernel's summary, or null when it is absent or not the expected shape (then
 * the renderer computes its own from the lists). */
function parseSummary(data: unknown): IChangeSummary | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const source = data as Record<string, unknown>;
  const total = count(source.total);
  if (total === null || !Array.isArray(source.folders)) {
    return null;
  }
  const folders: IFolderSummary[] = [];
  for (const entry of source.folders) {
    if (typeof entry !== 'object' || entry === null || typeof entry.folder !== 'string') {
      return null;
    }
    const numbers = [entry.created, entry.modified, entry.deleted].map(count);
    if (numbers.some(n => n === null)) {
      return null;
    }
    const [created, modified, deleted] = numbers as number[];
    folders.push({ folder: entry.folder, created, modified, deleted, bytes: count(entry.bytes) ?? 0 });
  }
  const kinds = KINDS.map(kind => count(source[kind]));
  return {
    total,
    folders,
    more_folders: count(source.more_folders) ?? 0,
    kinds: kinds.every(n => n !== null) ? { created: kinds[0]!, modified: kinds[1]!, deleted: kinds[2]! } : null
  };
}

/** The top-level folder a change is summarised under, as the kernel does: '' for a
 * file directly in the workspace. */
export function topFolderOf(path: string): string {
  const cut = path.indexOf('/');
  return cut <= 0 ? '' : path.slice(0, cut);
}

/** The folder a workspace path is in, '' for the workspace's top level. */
export function folderOf(path: string): string {
  const cut = path.lastIndexOf('/');
  return cut <= 0 ? '' : path.slice(0, cut);
}

/** A folder as the lists show it: "out/", and "./" for the top of /app. */
export function folderLabel(folder: string): string {
  return folder === '' || folder === '.' ? './' : `${folder.replace(/\/+$/, '')}/`;
}

/** Per-folder counts computed from the lists (a kernel that sends no summary): by
 * top-level folder, the biggest first. */
export function summarizeChanges(changes: IFileChanges, most: number = SUMMARY_FOLDERS): IChangeSummary {
  const byFolder = new Map<string, IFolderSummary>();
  let total = 0;
  for (const kind of KINDS) {
    for (const change of changes[kind]) {
      total += 1;
      const folder = topFolderOf(change.path);
      let line = byFolder.get(folder);
      if (line === undefined) {
        line = { folder, created: 0, modified: 0, deleted: 0, bytes: 0 };
        byFolder.set(folder, line);
      }
      line[kind] += 1;
      line.bytes += change.size ?? 0;
    }
  }
  const folders = Array.from(byFolder.values()).sort(
    (a, b) => b.created + b.modified + b.deleted - (a.created + a.modified + a.deleted) || a.folder.localeCompare(b.folder)
  );
  const kinds = { created: changes.created.length, modified: changes.modified.length, deleted: changes.deleted.length };
  return { total, folders: folders.slice(0, most), more_folders: Math.max(0, folders.length - most), kinds };
}

/** Strip a fixed-point number's trailing zeros: "1.50" -> "1.5", "12.0" -> "12". */
function trimZeros(text: string): string {
  return text.includes('.') ? text.replace(/0+$/, '').replace(/\.$/, '') : text;
}

/** Three significant digits, never in exponent form: 1.46, 12.3, 561. */
function threeDigits(value: number): string {
  const size = Math.abs(value);
  return trimZeros(value.toFixed(size >= 99.95 ? 0 : size >= 9.995 ? 1 : 2));
}

/** `value` scaled by `step` into the largest unit that keeps it at least 1. */
function scaled(value: number, step: number, units: string[]): string {
  let unit = 0;
  while (Math.abs(value) >= step && unit < units.length - 1) {
    value /= step;
    unit += 1;
  }
  let text = threeDigits(value);
  if (Math.abs(Number(text)) >= step && unit < units.length - 1) {
    text = value < 0 ? '-1' : '1'; // 1023.9 KiB reads as 1 MiB, not 1024 KiB
    unit += 1;
  }
  return unit === 0 ? `${Math.round(value)}${units[0]}` : `${text}${units[unit]}`;
}

/** Bytes as the kernel's text (%files, %limits) shows them: "22 B", "1.5 KiB", "561 MiB". */
export function formatSize(size: number | null | undefined): string {
  if (size === null || size === undefined || !Number.isFinite(size)) {
    return '';
  }
  return scaled(size, 1024, [' B', ' KiB', ' MiB', ' GiB', ' TiB']);
}

/** A count with an SI prefix: 950, "3.6 k", "12 G". */
export function formatCount(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) {
    return '';
  }
  return scaled(value, 1000, ['', ' k', ' M', ' G', ' T']);
}

/** Wasm fuel as what it counts, WebAssembly instructions: "12 G instructions". */
export function formatInstructions(fuel: number | null | undefined): string {
  const text = formatCount(fuel);
  return text === '' ? '' : `${text} instructions`;
}

/** A cell's guest work in its metering's unit: "12 G instructions" (fuel), "1.2 s CPU" (time). */
export function formatWork(metering: 'time' | 'fuel', fuel: number, cpuMs: number | null): string {
  if (metering === 'fuel') {
    return formatInstructions(fuel);
  }
  return cpuMs === null ? '' : `${formatDuration(cpuMs)} CPU`;
}

/** A duration for people: "0 ms", "<1 ms", "27 ms", "1.4 s", "42 s", "2 min 3 s", "1 h 5 min". */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) {
    return '';
  }
  if (ms === 0) {
    return '0 ms';
  }
  if (ms < 1) {
    return '<1 ms';
  }
  if (Math.round(ms) < 1000) {
    return `${Math.round(ms)} ms`;
  }
  const seconds = ms / 1000;
  if (seconds < 9.95) {
    return `${trimZeros(seconds.toFixed(1))} s`;
  }
  const whole = Math.round(seconds);
  if (whole < 60) {
    return `${whole} s`;
  }
  if (whole < 3600) {
    const rest = whole % 60;
    return `${Math.floor(whole / 60)} min${rest ? ` ${rest} s` : ''}`;
  }
  const minutes = Math.round((whole % 3600) / 60);
  const hours = Math.floor(whole / 3600) + (minutes === 60 ? 1 : 0);
  return `${hours} h${minutes % 60 ? ` ${minutes % 60} min` : ''}`;
}

/** A new element with a class and, optionally, text (never HTML: names are guest-chosen). */
export function element<K extends keyof HTMLElementTagNameMap>(tag: K, className: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export function plural(n: number, word: string): string {
  return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
}

/** Replace `node`'s content with the changes: a table of them, or beyond
 * SUMMARY_AFTER a summary per folder and the list behind a collapsed <details>. */
export function renderFileChanges(node: HTMLElement, changes: IFileChanges): void {
  node.textContent = '';
  const listed = changes.created.length + changes.modified.length + changes.deleted.length;
  const summary = changes.summary ?? (listed > SUMMARY_AFTER ? summarizeChanges(changes) : null);
  const total = Math.max(listed, summary?.total ?? 0);
  // The kinds' counts: the kernel's when it sends them (its lists may be cut).
  const counts = changes.summary?.kinds ?? {
    created: changes.created.length,
    modified: changes.modified.length,
    deleted: changes.deleted.length
  };
  const words = KINDS.filter(kind => counts[kind] > 0).map(kind => `${counts[kind].toLocaleString('en-US')} ${kind}`);
  node.appendChild(element('div', 'jp-WasmFileChanges-summary', `Files: ${words.join(', ') || `${total} changed`}`));

  if (total <= SUMMARY_AFTER || summary === null) {
    node.appendChild(changeTable(changes, MAX_ROWS));
    appendMore(node, Math.min(listed, MAX_ROWS), total);
    return;
  }
  node.appendChild(folderTable(summary));
  const details = element('details', 'jp-WasmFileChanges-details');
  const shown = Math.min(listed, MAX_ROWS);
  details.appendChild(
    element('summary', 'jp-WasmFileChanges-expand', shown < total ? `List the first ${shown} of ${plural(total, 'file')}` : `List all ${plural(total, 'file')}`)
  );
  details.appendChild(changeTable(changes, MAX_ROWS));
  appendMore(details, shown, total);
  node.appendChild(details);
}

function appendMore(node: HTMLElement, shown: number, total: number): void {
  if (total > shown) {
    node.appendChild(element('div', 'jp-WasmFileChanges-more', `and ${(total - shown).toLocaleString('en-US')} more`));
  }
}

/** Folder, created, modified, deleted, size: one row per folder. */
function folderTable(summary: IChangeSummary): HTMLTableElement {
  const table = element('table', 'jp-WasmFileChanges-folders');
  const head = table.createTHead().insertRow();
  for (const title of ['Folder', 'Created', 'Modified', 'Deleted', 'Size']) {
    head.appendChild(element('th', '', title));
  }
  const body = table.createTBody();
  const shown = summary.folders.slice(0, SUMMARY_FOLDERS);
  const more = summary.folders.length - shown.length + summary.more_folders;
  for (const line of shown) {
    const row = body.insertRow();
    row.dataset.folder = line.folder;
    row.insertCell().textContent = folderLabel(line.folder);
    for (const kind of KINDS) {
      const cell = row.insertCell();
      cell.textContent = line[kind] ? line[kind].toLocaleString('en-US') : '';
      cell.className = `jp-WasmFileChanges-count jp-WasmFileChanges-${kind}Count`;
    }
    row.insertCell().textContent = line.bytes ? formatSize(line.bytes) : '';
  }
  if (more > 0) {
    const cell = body.insertRow().insertCell();
    cell.colSpan = 5;
    cell.className = 'jp-WasmFileChanges-moreFolders';
    cell.textContent = `and ${plural(more, 'more folder')}`;
  }
  return table;
}

/** One row per change, at most `most`: kind, path (a download link unless deleted), size. */
function changeTable(changes: IFileChanges, most: number): HTMLTableElement {
  const table = element('table', 'jp-WasmFileChanges-table');
  let shown = 0;
  for (const kind of KINDS) {
    for (const change of changes[kind]) {
      if (shown >= most) {
        return table;
      }
      shown += 1;
      const row = table.insertRow();
      row.className = `jp-WasmFileChanges-${kind}`;
      row.dataset.path = change.path;
      row.insertCell().textContent = kind;
      const name = row.insertCell();
      if (kind === 'deleted') {
        name.textContent = change.path;
      } else {
        const link = element('a', 'jp-WasmFileChanges-download', change.path);
        link.href = '#';
        link.title = `Download ${change.path} from the sandbox`;
        link.onclick = event => {
          event.preventDefault();
          downloadRequested.emit({ path: change.path });
        };
        name.appendChild(link);
      }
      row.insertCell().textContent = formatSize(change.size);
    }
  }
  return table;
}
