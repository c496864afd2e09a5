/**
 * The sandbox panel and status item for the current notebook, when its kernel is
 * wasm-python. They talk to the kernel through the `wasm_kernel.session` comm
 * target, which the kernel answers on the host: this works wherever the kernel's
 * websocket does (JupyterHub, gateways), with no server extension.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';

import { DOWNLOAD_EVENT } from './fileChanges';
import { SessionModel } from './model';
import { SessionPanel } from './panel';
import { SandboxStatus } from './status';

const KERNEL_NAME = 'wasm-python';
const TARGET = 'wasm_kernel.session';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-wasm-kernel:session-panel',
  description: "The WebAssembly sandbox's session, files, limits and per-cell cost.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IStatusBar],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, statusBar: IStatusBar | null) => {
    const panel = new SessionPanel();
    panel.title.label = 'Sandbox';
    app.shell.add(panel, 'right', { rank: 200 });
    const status = new SandboxStatus();
    statusBar?.registerStatusItem('jupyterlab-wasm-kernel:status', {
      item: status,
      align: 'left',
      rank: 4,
      isActive: () => status.active
    });

    let model: SessionModel | null = null;
    let watched: NotebookPanel | null = null;

    const bind = async (): Promise<void> => {
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
        panel.showNone('Open a notebook that runs on "Python (WebAssembly sandbox)".');
        return;
      }
      await notebook.sessionContext.ready;
      const kernel = notebook.sessionContext.session?.kernel;
      if (!kernel || kernel.name !== KERNEL_NAME) {
        panel.showNone("This notebook's kernel is not the WebAssembly sandbox.");
        return;
      }
      const comm = kernel.createComm(TARGET);
      const bound = new SessionModel({ send: data => void comm.send(data as any) });
      comm.onMsg = msg => bound.handle(msg.content.data);
      comm.onClose = () => bound.dispose();
      comm.open({});
      model = bound;
      panel.setModel(bound);
      status.setModel(bound);
      await bound.refresh();
    };

    let restarting = false;
    const onKernel = (): void => void bind();
    const onStatus = (_: unknown, state: string): void => {
      status.setBusy(state === 'busy');
      // A restart keeps the kernel object but drops its comms: open ours again.
      if (state === 'restarting' || state === 'autorestarting') {
        restarting = true;
      } else if (restarting && state === 'idle') {
        restarting = false;
        void bind();
      }
    };
    // The file-change renderer's links: a download from the current notebook's session.
    document.addEventListener(DOWNLOAD_EVENT, event => {
      const path = (event as CustomEvent<{ path?: unknown }>).detail?.path;
      if (typeof path === 'string') {
        panel.download(path);
      }
    });
    tracker.currentChanged.connect(() => void bind());
    void bind();
  }
};

export default plugin;
