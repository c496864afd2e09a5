/**
 * The per-cell file-change list the kernel sends as
 * application/vnd.wasm-kernel.file-changes+json, drawn as a compact table.
 *
 * The data comes from a notebook, which may be untrusted: it is checked for shape,
 * and every string reaches the DOM through textContent, never as HTML.
 */

export const FILE_CHANGES_MIME = 'application/vnd.wasm-kernel.file-changes+json';
/**
 * Clicking a created or modified file's name asks for it with this DOM event; the
 * Sandbox panel's plugin downloads it through the current notebook's session (a
 * renderer has no kernel of its own).
 */
export const DOWNLOAD_EVENT = 'wasm-kernel-download';

export type ChangeKind = 'created' | 'modified' | 'deleted';

export interface IFileChange {
  path: string;
  size: number | null;
}

export interface IFileChanges {
  created: IFileChange[];
  modified: IFileChange[];
  deleted: IFileChange[];
}

const KINDS: ChangeKind[] = ['created', 'modified', 'deleted'];
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
  return parsed;
}

/** Bytes as the kernel's text shows them: B, KiB, MiB, GiB. */
export function formatSize(size: number | null): string {
  if (size === null) {
    return '';
  }
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = size;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Replace `node`'s content with the table of `changes`. */
export function renderFileChanges(node: HTMLElement, changes: IFileChanges): void {
  node.textContent = '';
  const counts = KINDS.filter(kind => changes[kind].length > 0).map(
    kind => `${changes[kind].length} ${kind}`
  );
  const summary = document.createElement('div');
  summary.className = 'jp-WasmFileChanges-summary';
  summary.textContent = `Files: ${counts.join(', ')}`;
  node.appendChild(summary);

  const table = document.createElement('table');
  table.className = 'jp-WasmFileChanges-table';
  let shown = 0;
  let hidden = 0;
  for (const kind of KINDS) {
    for (const change of changes[kind]) {
      if (shown >= MAX_ROWS) {
        hidden += 1;
        continue;
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
        const link = document.createElement('a');
        link.className = 'jp-WasmFileChanges-download';
        link.href = '#';
        link.title = `Download ${change.path} from the sandbox`;
        link.textContent = change.path;
        link.onclick = event => {
          event.preventDefault();
          link.dispatchEvent(new CustomEvent(DOWNLOAD_EVENT, { bubbles: true, detail: { path: change.path } }));
        };
        name.appendChild(link);
      }
      row.insertCell().textContent = formatSize(change.size);
    }
  }
  node.appendChild(table);
  if (hidden > 0) {
    const more = document.createElement('div');
    more.className = 'jp-WasmFileChanges-more';
    more.textContent = `and ${hidden} more`;
    node.appendChild(more);
  }
}
