/**
 * The MIME renderer for the files a cell changed. Rank 0, so it wins over the
 * text/html table the same bundle carries (that one is for frontends without this
 * extension); safe, so it also renders in untrusted notebooks.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { FILE_CHANGES_MIME } from './constants';
import { parseFileChanges, renderFileChanges } from './fileChanges';

export class FileChangesRenderer extends Widget implements IRenderMime.IRenderer {
  constructor() {
    super();
    this.addClass('jp-WasmFileChanges');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const changes = parseFileChanges(model.data[FILE_CHANGES_MIME]);
    if (changes === null) {
      this.node.textContent = 'wasm-kernel: this file-change list is malformed';
    } else {
      renderFileChanges(this.node, changes);
    }
    return Promise.resolve();
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [FILE_CHANGES_MIME],
  defaultRank: 0,
  createRenderer: () => new FileChangesRenderer()
};

const extension: IRenderMime.IExtension = {
  id: 'jupyterlab-wasm-kernel:file-changes',
  description: 'Shows the files each sandboxed cell created, modified and deleted.',
  rendererFactory,
  rank: 0,
  dataType: 'json'
};

export default extension;
