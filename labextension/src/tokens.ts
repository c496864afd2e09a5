/**
 * What one plugin of the extension offers another, as JupyterLab tokens: the Sandbox
 * files browser (drivePlugin.ts) to the Sandbox panel (index.ts), which shows how many
 * files a workspace holds and leaves listing, uploading, downloading, renaming and
 * deleting them to the browser.
 */
import { Token } from '@lumino/coreutils';
import { ISignal } from '@lumino/signaling';

export interface ISandboxFiles {
  /** Whether the drive is served here (the server extension is on); `reason` says why not. */
  readonly available: boolean;
  readonly reason: string | null;
  /** Show the browser, on the current notebook's workspace. */
  show(): void;
  /** Emitted when the browser changed a workspace's files (an upload, a rename, a delete). */
  readonly changed: ISignal<ISandboxFiles, void>;
}

export const ISandboxFiles = new Token<ISandboxFiles>(
  'jupyterlab-wasm-kernel:ISandboxFiles',
  "The Sandbox files browser: each notebook's workspace in JupyterLab's file browser."
);
