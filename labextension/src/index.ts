/**
 * The sandbox panel and status item for the current notebook, when its kernel is
 * wasm-python. They talk to the kernel through the `wasm_kernel.session` comm
 * target, which the kernel answers on the host: this works wherever the kernel's
 * websocket does (JupyterHub, gateways), with no server extension.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { JSONObject } from '@lumino/coreutils';
import { Widget } from '@lumino/widgets';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';

import drivePlugin from './drivePlugin';
import linksPlugin from './outputLinks';
import stdinPlugin from './stdin';
import { downloadRequested } from './events';
import { isSandboxKernel } from './constants';
import { SessionModel } from './model';
import { SessionPanel } from './panel';
import { SandboxStatus } from './status';
import { ISandboxFiles } from './tokens';

const TARGET = 'wasm_kernel.session';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-wasm-kernel:session-panel',
  description: "The WebAssembly sandbox's session, files, limits and per-cell cost.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IStatusBar, ISettingRegistry, ITranslator, ISandboxFiles],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    statusBar: IStatusBar | null,
    settingRegistry: ISettingRegistry | null,
    translator: ITranslator | null,
    files: ISandboxFiles | null
  ) => {
    const trans = (translator ?? nullTranslator).load('jupyterlab-wasm-kernel');
    const panel = new SessionPanel(); // its id is PANEL_ID
    panel.title.label = trans.__('Sandbox');
    // The workspace's files are the Sandbox files browser's: the panel counts them and opens it.
    if (files?.available) {
      panel.onShowFiles = () => files.show();
    } else if (files?.reason) {
      panel.filesElsewhere = files.reason;
    }
    files?.changed.connect(() => void model?.refresh());
    app.shell.add(panel, 'right', { rank: 200 });
    const status = new SandboxStatus();
    // A click on the status item (or Enter on it) opens the Sandbox panel.
    status.onClick = () => app.shell.activateById(panel.id);
    statusBar?.registerStatusItem('jupyterlab-wasm-kernel:status', {
      item: status,
      align: 'left',
      rank: 4,
      isActive: () => status.active,
      activeStateChanged: status.activeChanged
    });
    // schema/session-panel.json: the status item can be turned off, at once.
    if (settingRegistry !== null) {
      const apply = (settings: ISettingRegistry.ISettings): void => {
        status.setShown((settings.composite.showStatusItem as boolean | undefined) ?? true);
      };
      settingRegistry
        .load(plugin.id)
        .then(settings => {
          apply(settings);
          settings.changed.connect(apply);
        })
        .catch(reason => console.warn('wasm-kernel: the Sandbox settings could not be read; using the defaults', reason));
    }

    let model: SessionModel | null = null;
    let watched: NotebookPanel | null = null;
    // Notebooks seen running the sandbox: without a kernel later, theirs was shut down.
    const sandboxed = new WeakSet<NotebookPanel>();
    // Each bind supersedes the ones before it, which may still be waiting.
    let binding = 0;

    /** Did this notebook's kernel, now gone, run the sandbox? */
    const wasSandbox = (notebook: NotebookPanel): boolean => {
      const spec = notebook.context.model?.getMetadata('kernelspec') as { name?: unknown } | undefined;
      return sandboxed.has(notebook) || isSandboxKernel(spec);
    };

    const unbind = (why: 'shut-down' | 'other-kernel'): void => {
      model?.dispose();
      model = null;
      status.setModel(null);
      panel.showNone(why);
    };

    const bind = async (): Promise<void> => {
      const generation = ++binding;
      model?.dispose();
      model = null;
      status.setModel(null);
      const notebook = tracker.currentWidget;
      if (notebook !== watched) {
        watched?.sessionContext.kernelChanged.disconnect(onKernel);
        watched?.sessionContext.statusChanged.disconnect(onStatus);
        notebook?.sessionContext.kernelChanged.connect(onKernel);
        notebook?.sessionContext.statusChanged.connect(onStatus);
        watched = notebook;
      }
      if (notebook === null) {
        panel.showNone('no-notebook');
        return;
      }
      await notebook.sessionContext.ready;
      if (generation !== binding) {
        return;
      }
      const kernel = notebook.sessionContext.session?.kernel;
      if (!kernel || kernel.status === 'dead') {
        panel.showNone(wasSandbox(notebook) ? 'shut-down' : kernel ? 'other-kernel' : 'no-kernel');
        return;
      }
      if (!isSandboxKernel(kernel)) {
        sandboxed.delete(notebook);
        panel.showNone('other-kernel');
        return;
      }
      sandboxed.add(notebook);
      const comm = kernel.createComm(TARGET);
      const bound = new SessionModel({ send: data => void comm.send(data as JSONObject) });
      comm.onMsg = msg => bound.handle(msg.content.data);
      comm.onClose = () => bound.dispose();
      comm.open({});
      model = bound;
      panel.onRewind = count => runRewind(kernel, count);
      panel.confirmRewind = confirmRewind;
      panel.setModel(bound);
      status.setModel(bound);
      await bound.refresh();
    };

    let restarting = false;
    const onKernel = (): void => void bind();
    const onStatus = (_: unknown, state: string): void => {
      status.setBusy(state === 'busy');
      if (state === 'dead' && watched !== null) {
        binding += 1; // a bind still waiting must not bring the old kernel back
        unbind(wasSandbox(watched) ? 'shut-down' : 'other-kernel');
        return;
      }
      // A restart keeps the kernel object but drops its comms: open ours again.
      if (state === 'restarting' || state === 'autorestarting') {
        restarting = true;
      } else if (restarting && state === 'idle') {
        restarting = false;
        void bind();
      }
    };
    // The file-change renderer's links: a download from the current notebook's session.
    // A link in an output (outputLinks.ts) also gives what to do if the workspace has no such file.
    downloadRequested.connect((_, request) => panel.download(request.path, request.fallback));
    tracker.currentChanged.connect(() => void bind());
    void bind();
  }
};

/** JupyterLab's dialog: what a rewind changes, Cancel or Rewind. */
async function confirmRewind(title: string, body: HTMLElement): Promise<boolean> {
  const result = await showDialog({
    title,
    body: new Widget({ node: body }),
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Rewind' })]
  });
  return result.button.accept;
}

/** `%rewind count` as a cell of its own on the kernel (numbered, in the history as any
 * cell), its one line shown as a notification: the notebook's cells are left as they are. */
async function runRewind(kernel: Kernel.IKernelConnection, count: number): Promise<void> {
  const future = kernel.requestExecute({ code: `%rewind ${count}`, silent: false, store_history: true });
  let said = '';
  future.onIOPub = msg => {
    if (KernelMessage.isStreamMsg(msg)) {
      said += msg.content.text;
    }
  };
  const reply = await future.done;
  const line = said.trim().split('\n').pop() ?? '';
  if (reply.content.status === 'ok') {
    Notification.success(line || `Back to just after cell [${count}]`, { autoClose: 8000 });
  } else {
    Notification.error(line || `The rewind to cell [${count}] did not happen`, { autoClose: false });
  }
}

export default [plugin, drivePlugin, linksPlugin, stdinPlugin];
