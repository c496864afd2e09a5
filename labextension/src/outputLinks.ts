/**
 * Links in a sandboxed notebook's outputs to files the notebook wrote. A cell's HTML
 * may link a file by a path relative to the notebook: otter-grader's export shows
 * `<a href="lab01_<time>.zip" download>here</a>`. JupyterLab points such a link at the
 * server's files of the notebook's folder, but the sandbox wrote the file into its
 * workspace (/app), which those files do not hold. A click on such a link in a
 * wasm-python notebook downloads the file from the workspace, through the notebook's
 * session (as the file-change display's links do), and only if the workspace has no
 * such file, from the server, as JupyterLab would have: the same file the notebook's
 * code sees at that path.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { PathExt, URLExt } from '@jupyterlab/coreutils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { isSandboxKernel } from './constants';
import { downloadRequested } from './events';

const FOLLOWED = 'wasmKernelFollowed'; // a link clicked again, as JupyterLab made it

/** The workspace path a link of the notebook's output names, or null if it names none. */
function workspacePath(notebook: NotebookPanel, link: HTMLAnchorElement, filesPath: string): string | null {
  const url = new URL(link.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith(filesPath)) {
    return null;
  }
  const serverPath = decodeURIComponent(url.pathname.slice(filesPath.length));
  const folder = PathExt.dirname(notebook.context.localPath);
  if (folder === '' || folder === '.') {
    return serverPath;
  }
  return serverPath.startsWith(`${folder}/`) ? serverPath.slice(folder.length + 1) : null;
}

const linksPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-wasm-kernel:output-links',
  description: "Links in a sandboxed notebook's outputs lead to the files its workspace holds.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const filesPath = new URL(URLExt.join(app.serviceManager.serverSettings.baseUrl, 'files/'), location.href).pathname;
    const onClick = (notebook: NotebookPanel, event: MouseEvent): void => {
      const link = (event.target as Element | null)?.closest?.('a');
      if (!(link instanceof HTMLAnchorElement) || !link.closest('.jp-OutputArea-output') || link.dataset[FOLLOWED]) {
        return;
      }
      if (!isSandboxKernel(notebook.sessionContext.session?.kernel)) {
        return;
      }
      const path = workspacePath(notebook, link, filesPath);
      if (path === null || path === '') {
        return;
      }
      event.preventDefault();
      event.stopPropagation();
      // Not in the workspace: the server's file, as JupyterLab's link had it.
      const fallback = (): void => {
        link.dataset[FOLLOWED] = '1';
        try {
          link.click();
        } finally {
          delete link.dataset[FOLLOWED];
        }
      };
      downloadRequested.emit({ path, fallback });
    };
    tracker.widgetAdded.connect((_, notebook) => {
      notebook.content.node.addEventListener('click', event => onClick(notebook, event), true);
    });
  }
};

export default linksPlugin;
