/**
 * What one part of the extension tells another in the same page: the Sandbox panel
 * changed a workspace's files (an upload, a delete), so the Sandbox files browser
 * lists them now rather than at its next poll.
 */
import { Signal } from '@lumino/signaling';

export const workspaceChanged = new Signal<object, void>({});
