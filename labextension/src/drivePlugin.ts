/**
 * The Sandbox drive in the left sidebar: a JupyterLab file browser on the
 * `Sandbox:` drive (drive.ts), with the default browser's upload, new-folder and
 * refresh buttons. It follows the current notebook: switching to a notebook shows
 * that notebook's workspace, and a cell that changed files refreshes it.
 *
 * The browser is made here, not by the file-browser factory: the factory tracks
 * every browser it makes, and JupyterLab puts a new notebook (the Launcher's card,
 * File > New) in the folder of the tracker's current browser. A workspace is no
 * place for a notebook (its kernel's /app would not be that folder), so this one is
 * never tracked and new files always go where the ordinary file browser is. For
 * the same reason JupyterLab's file-browser context menu, whose commands act on the
 * tracker's current browser, is replaced inside this one by a menu of its own.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { FileBrowser, FilterFileBrowserModel, Uploader } from '@jupyterlab/filebrowser';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { KernelMessage } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ITranslator, nullTranslator, TranslationBundle } from '@jupyterlab/translation';
import { closeIcon, copyIcon, downloadIcon, editIcon, LabIcon, newFolderIcon, refreshIcon, ToolbarButton } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import { Signal } from '@lumino/signaling';
import { ContextMenu, Widget } from '@lumino/widgets';

import { FILE_CHANGES_MIME, isSandboxKernel } from './constants';
import { DRIVE_NAME, SandboxDrive } from './drive';
import { ISandboxFiles } from './tokens';

export const BROWSER_ID = 'jp-wasm-sandbox-files';
/** The Sandbox files browser's refresh interval when the settings say nothing (schema/drive.json). */
const DEFAULT_REFRESH_MS = 5000;

export const sandboxFilesIcon = new LabIcon({
  name: 'jupyterlab-wasm-kernel:sandbox-files',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24"><path class="jp-icon3" fill="#616161" ' +
    'd="M12 2 3 6.5v11L12 22l9-4.5v-11L12 2zm0 2.2 6.6 3.3L12 10.8 5.4 7.5 12 4.2zM5 9.1l6 3v7.6l-6-3V9.1zm8 10.6v-7.6l6-3v7.6l-6 3z"/></svg>'
});

/** Whether an iopub message is the per-cell file-change display. */
function isFileChanges(msg: KernelMessage.IMessage): boolean {
  const type = msg.header.msg_type;
  if (type !== 'display_data' && type !== 'update_display_data') {
    return false;
  }
  const data = (msg.content as { data?: Record<string, unknown> }).data;
  return data !== undefined && FILE_CHANGES_MIME in data;
}

/**
 * A right-click in the browser opens its own menu (open, rename, duplicate,
 * download, delete), acting on this browser's selection: JupyterLab's own menu would act on
 * the tracked browser's.
 */
function contextMenuOf(browser: FileBrowser, appCommands: CommandRegistry, trans: TranslationBundle): (event: MouseEvent) => void {
  const commands = new CommandRegistry();
  const selected = () => Array.from(browser.selectedItems());
  commands.addCommand('open', {
    label: trans.__('Open'),
    isEnabled: () => selected().length > 0,
    execute: () => {
      for (const item of selected()) {
        void appCommands.execute('docmanager:open', { path: item.path });
      }
    }
  });
  commands.addCommand('rename', {
    label: trans.__('Rename'),
    icon: editIcon,
    isEnabled: () => selected().length === 1,
    execute: () => browser.rename()
  });
  commands.addCommand('duplicate', {
    label: trans.__('Duplicate'),
    icon: copyIcon,
    isEnabled: () => selected().some(item => item.type !== 'directory'),
    execute: () => browser.duplicate()
  });
  commands.addCommand('download', {
    label: trans.__('Download'),
    icon: downloadIcon,
    isEnabled: () => selected().some(item => item.type !== 'directory'),
    execute: () => browser.download()
  });
  commands.addCommand('delete', {
    label: trans.__('Delete'),
    icon: closeIcon,
    isEnabled: () => selected().length > 0,
    execute: () => browser.delete()
  });
  const menu = new ContextMenu({ commands });
  menu.menu.addClass('jp-WasmSandboxDriveMenu');
  for (const [rank, command] of ['open', 'rename', 'duplicate', 'download', 'delete'].entries()) {
    menu.addItem({ command, selector: '.jp-DirListing-item', rank });
  }
  return (event: MouseEvent): void => {
    // The listing selected the item under the pointer on mousedown, before this.
    event.stopPropagation(); // never JupyterLab's menu: its commands act on another browser
    if (event.shiftKey) {
      return; // the browser's own menu, as JupyterLab allows elsewhere
    }
    if (menu.open(event)) {
      event.preventDefault();
    }
  };
}

const drivePlugin: JupyterFrontEndPlugin<ISandboxFiles> = {
  id: 'jupyterlab-wasm-kernel:drive',
  description: "Each notebook's sandbox workspace as a drive in the file browser.",
  autoStart: true,
  requires: [IDocumentManager, INotebookTracker],
  optional: [ISettingRegistry, ITranslator],
  provides: ISandboxFiles,
  activate: async (
    app: JupyterFrontEnd,
    docManager: IDocumentManager,
    tracker: INotebookTracker,
    settingRegistry: ISettingRegistry | null,
    translator: ITranslator | null
  ): Promise<ISandboxFiles> => {
    const trans = (translator ?? nullTranslator).load('jupyterlab-wasm-kernel');
    const changed = new Signal<ISandboxFiles, void>({} as ISandboxFiles);
    const drive = new SandboxDrive(app.serviceManager.serverSettings);
    const status = await drive.status();
    if (!status.available) {
      // Say so where the drive would be, once, instead of failing on every listing.
      const note = new Widget();
      note.id = BROWSER_ID;
      note.addClass('jp-WasmSandboxDriveNote');
      note.node.textContent = trans.__('Sandbox files are not available here: %1.', status.reason ?? trans.__('no reason given'));
      note.title.icon = sandboxFilesIcon;
      note.title.caption = trans.__('Sandbox files');
      app.shell.add(note, 'left', { rank: 150 });
      const reason = trans.__('Sandbox files are not available here: %1.', status.reason ?? trans.__('no reason given'));
      return { available: false, reason, show: () => app.shell.activateById(BROWSER_ID), changed };
    }
    app.serviceManager.contents.addDrive(drive);
    // The settings' refresh interval, read once: a file browser's model takes it when made.
    let refreshInterval = DEFAULT_REFRESH_MS;
    if (settingRegistry !== null) {
      try {
        const settings = await settingRegistry.load(drivePlugin.id);
        refreshInterval = (settings.composite.refreshInterval as number | undefined) ?? DEFAULT_REFRESH_MS;
      } catch (reason) {
        console.warn('wasm-kernel: the Sandbox files settings could not be read; using the defaults', reason);
      }
    }
    const model = new FilterFileBrowserModel({
      manager: docManager,
      driveName: DRIVE_NAME,
      refreshInterval,
      refreshStandby: 'when-hidden'
    });
    const browser = new FileBrowser({ id: BROWSER_ID, model });
    // As the ordinary file browser shows by default (its settings'
    // showFileCheckboxes): the checkbox column left the Modified column too narrow
    // for its own header ("Mo…").
    browser.showFileCheckboxes = false;
    browser.node.addEventListener('contextmenu', contextMenuOf(browser, app.commands, trans));
    browser.title.icon = sandboxFilesIcon;
    browser.title.caption = trans.__("Sandbox files: each notebook's workspace");
    browser.node.setAttribute('aria-label', trans.__('Sandbox files'));
    browser.toolbar.addItem(
      'new-folder',
      new ToolbarButton({ icon: newFolderIcon, tooltip: trans.__('New folder'), onClick: () => void browser.createNewDirectory() })
    );
    browser.toolbar.addItem('upload', new Uploader({ model: browser.model }));
    browser.toolbar.addItem(
      'refresh',
      new ToolbarButton({ icon: refreshIcon, tooltip: trans.__('Refresh'), onClick: () => void browser.model.refresh() })
    );
    app.shell.add(browser, 'left', { rank: 150 });
    // The Sandbox panel's count of files follows the browser's uploads, renames and deletes.
    drive.fileChanged.connect(() => changed.emit());

    // Follow the current notebook: show its workspace if it has one.
    let watched: NotebookPanel | null = null;
    const onIOPub = (_: unknown, msg: KernelMessage.IMessage): void => {
      if (isFileChanges(msg)) {
        void browser.model.refresh();
      }
    };
    // The server re-points the session just after the rename: look again shortly.
    const onRenamed = (): void => {
      void follow();
      window.setTimeout(() => void follow(), 1000);
    };
    const follow = async (): Promise<void> => {
      watched?.sessionContext.iopubMessage.disconnect(onIOPub);
      watched?.context.pathChanged.disconnect(onRenamed);
      watched = tracker.currentWidget;
      if (watched === null) {
        return;
      }
      watched.sessionContext.iopubMessage.connect(onIOPub);
      // A renamed notebook keeps its session (the server re-points it): follow it there.
      watched.context.pathChanged.connect(onRenamed);
      await watched.sessionContext.ready;
      if (!isSandboxKernel(watched.sessionContext.session?.kernel)) {
        return;
      }
      const path = watched.context.localPath;
      try {
        await drive.get(path, { content: false });
      } catch {
        return; // no session yet: the browser stays where it is
      }
      if (browser.model.path !== `${DRIVE_NAME}:${path}`) {
        await browser.model.cd(`/${path}`);
      }
    };
    tracker.currentChanged.connect(() => void follow());
    // A first cell makes the session: look again when a kernel becomes idle.
    tracker.widgetAdded.connect((_, panel) =>
      panel.sessionContext.statusChanged.connect((__, state) => {
        if (state === 'idle' && panel === tracker.currentWidget && browser.model.path !== `${DRIVE_NAME}:${panel.context.localPath}`) {
          void follow();
        }
      })
    );
    void follow();
    return { available: true, reason: null, show: () => app.shell.activateById(BROWSER_ID), changed };
  }
};

export default drivePlugin;
