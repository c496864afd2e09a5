/**
 * A cell never ends with its input() box still open.
 *
 * JupyterLab (4.6) leaves a cell's input box in place when the cell ends without an
 * answer: after an interrupt, a restart, or anything else that ends the kernel's
 * wait. It does so on ipykernel too. Typing into that box then sends a reply that no
 * kernel waits for (the kernel drops it), while the output shows it as if it had
 * been read. For notebooks on the wasm-python kernel this plugin removes such a box
 * once its cell's execution is over (its reply and idle status came, or the restart
 * cancelled it), and keeps what was typed into it, unsent, as a line in the output:
 * nothing typed is lost without a word. A password is not shown, only that one was
 * typed.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import type { CodeCell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { IStdin, OutputArea } from '@jupyterlab/outputarea';
import type { Widget } from '@lumino/widgets';

import { isSandboxKernel } from './constants';

/** JupyterLab's class on an answered box, which it removes itself 0.5 s later. */
const STDIN_HIDING_CLASS = 'jp-OutputArea-stdin-hiding';

/** The line that keeps unsent text visible; null when nothing was typed. */
export function unsentNote(typed: string, password: boolean): string | null {
  if (typed === '') {
    return null;
  }
  return password ? 'input not sent: (a password was typed; not shown)\n' : `input not sent: ${typed}\n`;
}

/**
 * Close `item`, the box `stdin` of `area`, if it is still waiting for an answer:
 * what was typed becomes a stderr line of the output. True if it was closed.
 */
export function closeUnansweredInput(area: OutputArea, stdin: IStdin, item: Widget | null): boolean {
  if (item === null || item.isDisposed || item.hasClass(STDIN_HIDING_CLASS)) {
    return false; // answered (JupyterLab closes it), or already gone with a cleared output
  }
  const input = stdin.node.querySelector('input');
  const note = unsentNote(input?.value ?? '', input?.type === 'password');
  item.dispose();
  if (note !== null && !area.model.isDisposed) {
    area.model.add({ output_type: 'stream', name: 'stderr', text: note });
  }
  return true;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-wasm-kernel:stdin',
  description: "Closes an input() box when its cell has ended unanswered, and keeps what was typed in it.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const watched = new WeakSet<OutputArea>();
    NotebookActions.executionScheduled.connect((_, { notebook, cell }) => {
      if (cell.model.type !== 'code') {
        return;
      }
      const panel: NotebookPanel | undefined = tracker.find(candidate => candidate.content === notebook);
      const area = (cell as CodeCell).outputArea;
      if (panel === undefined || watched.has(area)) {
        return;
      }
      watched.add(area);
      area.inputRequested.connect((sender, stdin) => {
        const kernel = panel.sessionContext.session?.kernel;
        const future = sender.future;
        if (!kernel || !isSandboxKernel(kernel) || !future) {
          return;
        }
        const item = stdin.parent; // the output item JupyterLab made for the box
        const over = (): void => {
          if (closeUnansweredInput(sender, stdin, item)) {
            // The kernel waits for nothing now: no "pending input" guard may block the next cell.
            kernel.removeInputGuard();
          }
        };
        // Settled: the reply and idle came, or a restart (or a rerun) cancelled it.
        future.done.then(over, over);
      });
    });
  }
};

export default plugin;
