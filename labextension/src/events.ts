/**
 * What one part of the extension tells another in the same page, as Lumino signals
 * (the renderers and the plugins share this module, not a reference to each other).
 */
import { Signal } from '@lumino/signaling';

/** A workspace file asked for from a notebook's output: a file-change list's link, or
 * a relative link (outputLinks.ts, with what to do if the workspace has no such file). */
export interface IDownloadRequest {
  path: string;
  fallback?: () => void;
}

/** Emitted by the renderers, which have no kernel of their own; the Sandbox panel's
 * plugin downloads the file through the current notebook's session. */
export const downloadRequested = new Signal<object, IDownloadRequest>({});
