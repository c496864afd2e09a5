/**
 * The Sandbox drive: each notebook's sandbox workspace in JupyterLab's file
 * browser, as a `Contents.IDrive` (the way jupyter-drives and jupyterlab-git add
 * theirs). It speaks to the package's Jupyter Server extension
 * (wasm_kernel/kernel/server), whose API has the Contents API's shape under
 * /wasm-kernel/drive/, so models pass through unchanged: JupyterLab's own viewers
 * and editors open what it returns.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { Contents, ServerConnection } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

export const DRIVE_NAME = 'Sandbox';
const API = 'wasm-kernel/drive/api/contents';
const FILES = 'wasm-kernel/drive/files';
const STATUS = 'wasm-kernel/drive/status';

/** Whether this server serves the drive, and if not, the line saying why. */
export interface IDriveStatus {
  available: boolean;
  reason: string | null;
}

export class SandboxDrive implements Contents.IDrive {
  readonly name = DRIVE_NAME;
  readonly serverSettings: ServerConnection.ISettings;

  constructor(serverSettings?: ServerConnection.ISettings) {
    this.serverSettings = serverSettings ?? ServerConnection.makeSettings();
  }

  get fileChanged(): ISignal<this, Contents.IChangedArgs> {
    return this._fileChanged;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (!this._isDisposed) {
      this._isDisposed = true;
      Signal.clearData(this);
    }
  }

  /** The server's answer to "can you serve the drive here?" (404: the extension is not installed). */
  async status(): Promise<IDriveStatus> {
    const url = URLExt.join(this.serverSettings.baseUrl, STATUS);
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, {}, this.serverSettings);
    } catch {
      return { available: false, reason: 'the Jupyter server could not be reached' };
    }
    if (response.status === 404) {
      return {
        available: false,
        reason: "this Jupyter server does not run wasm-kernel's server extension (jupyter server extension enable wasm_kernel)"
      };
    }
    const data = await response.json().catch(() => ({}));
    return { available: data.available === true, reason: typeof data.reason === 'string' ? data.reason : null };
  }

  async get(localPath: string, options?: Contents.IFetchOptions): Promise<Contents.IModel> {
    const query: Record<string, string> = { content: options?.content === false ? '0' : '1' };
    if (options?.type) {
      query.type = options.type;
    }
    if (options?.format) {
      query.format = options.format;
    }
    return this._request('GET', localPath, undefined, query);
  }

  async getDownloadUrl(localPath: string): Promise<string> {
    const url = new URL(URLExt.join(this.serverSettings.baseUrl, FILES, URLExt.encodeParts(localPath)), location.href);
    url.searchParams.set('download', '1');
    // As JupyterLab's own drive does: a download is a plain navigation, which
    // carries the cookie but no header, so the XSRF token rides in the query.
    const xsrf = document.cookie.match('\\b_xsrf=([^;]*)\\b');
    if (xsrf) {
      url.searchParams.set('_xsrf', xsrf[1]);
    }
    return url.toString();
  }

  async newUntitled(options: Contents.ICreateOptions = {}): Promise<Contents.IModel> {
    const model = await this._request('POST', options.path ?? '', { type: options.type ?? 'file', ext: options.ext ?? '' });
    this._fileChanged.emit({ type: 'new', oldValue: null, newValue: model });
    return model;
  }

  async delete(localPath: string): Promise<void> {
    await this._request('DELETE', localPath);
    this._fileChanged.emit({ type: 'delete', oldValue: { path: localPath }, newValue: null });
  }

  async rename(oldLocalPath: string, newLocalPath: string): Promise<Contents.IModel> {
    const model = await this._request('PATCH', oldLocalPath, { path: newLocalPath });
    this._fileChanged.emit({ type: 'rename', oldValue: { path: oldLocalPath }, newValue: model });
    return model;
  }

  async save(localPath: string, options: Partial<Contents.IModel> = {}): Promise<Contents.IModel> {
    const model = await this._request('PUT', localPath, options);
    this._fileChanged.emit({ type: 'save', oldValue: null, newValue: model });
    return model;
  }

  async copy(localPath: string, toLocalDir: string): Promise<Contents.IModel> {
    const model = await this._request('POST', toLocalDir, { copy_from: localPath });
    this._fileChanged.emit({ type: 'new', oldValue: null, newValue: model });
    return model;
  }

  // A workspace keeps no checkpoints: the sandbox's own undo (%undo) is per cell.
  // Saving still asks for one, so it gets a model that restores nothing.
  async createCheckpoint(localPath: string): Promise<Contents.ICheckpointModel> {
    return { id: 'none', last_modified: new Date().toISOString() };
  }

  async listCheckpoints(localPath: string): Promise<Contents.ICheckpointModel[]> {
    return [];
  }

  async restoreCheckpoint(localPath: string, checkpointID: string): Promise<void> {
    throw new Error('the Sandbox drive keeps no checkpoints; %undo in the notebook reverts a cell\'s file changes');
  }

  async deleteCheckpoint(localPath: string, checkpointID: string): Promise<void> {
    return;
  }

  /** Tell the file browser that files changed outside it (a cell wrote them). */
  notifyChanged(localPath: string): void {
    this._fileChanged.emit({ type: 'save', oldValue: null, newValue: { path: localPath } });
  }

  private async _request(
    method: string,
    localPath: string,
    body?: unknown,
    query?: Record<string, string>
  ): Promise<Contents.IModel> {
    let url = URLExt.join(this.serverSettings.baseUrl, API, URLExt.encodeParts(localPath));
    if (query) {
      url += URLExt.objectToQueryString(query);
    }
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
    }
    const response = await ServerConnection.makeRequest(url, init, this.serverSettings);
    if (!response.ok) {
      const data = await response.json().catch(() => ({}));
      const message = typeof data.message === 'string' ? data.message : `the drive answered ${response.status}`;
      throw new ServerConnection.ResponseError(response, message);
    }
    // A DELETE's 204 has no body; its callers read none.
    return response.status === 204 ? (undefined as unknown as Contents.IModel) : response.json();
  }

  private _fileChanged = new Signal<this, Contents.IChangedArgs>(this);
  private _isDisposed = false;
}
