/**
 * The Sandbox panel drawn in jsdom. JupyterLab's own widgets (SidePanel, the toolbar,
 * icons, dialogs) ship as ES modules jest does not load: they are stood in for by
 * small fakes, the panel's DOM and its decisions are what is tested.
 */
jest.mock('@jupyterlab/apputils', () => ({
  showDialog: jest.fn(),
  Dialog: {
    cancelButton: () => ({ label: 'Cancel', accept: false }),
    warnButton: (options: { label: string }) => ({ label: options.label, accept: true })
  }
}));
jest.mock('@jupyterlab/ui-components', () => {
  const { Panel, Widget } = jest.requireActual('@lumino/widgets');
  class SidePanel extends Widget {
    constructor(options: { content: InstanceType<typeof Panel> }) {
      super();
      this.header = new Panel();
      this.content = options.content;
      this.node.appendChild(this.header.node);
      this.node.appendChild(this.content.node);
    }
    addWidget(widget: InstanceType<typeof Widget>): void {
      this.content.addWidget(widget);
    }
    header: InstanceType<typeof Panel>;
    content: InstanceType<typeof Panel>;
    toolbar = { addItem: (): boolean => true };
  }
  class ToolbarButton extends Widget {
    constructor(readonly props: Record<string, unknown>) {
      super();
    }
    enabled = true;
  }
  const icon = { element: (options: { className?: string }) => Object.assign(document.createElement('span'), { className: options.className ?? '' }) };
  return {
    SidePanel,
    ToolbarButton,
    caretDownIcon: icon,
    deleteIcon: icon,
    downloadIcon: icon,
    fileIcon: icon,
    fileUploadIcon: icon,
    folderIcon: icon,
    refreshIcon: icon
  };
});

import './jsdomPolyfills';

import { showDialog } from '@jupyterlab/apputils';

import { ICellCost, IWorkspaceFile, SessionModel } from '../src/model';
import { groupByFolder, SessionPanel } from '../src/panel';

const INFO = {
  session_id: 'c667ae75-9d0b-4513-8b67-8979c4bd01c0',
  notebook: 'a notebook with a rather long name that cannot fit.ipynb',
  workspace: '/app',
  metering: 'time' as const,
  limits: {
    disk: { value: 1 << 30, at_most: 1 << 30, shown: '1 GiB', at_most_shown: '1 GiB' },
    stdout: { value: 10 << 20, at_most: 10 << 20, shown: '10 MiB', at_most_shown: '10 MiB' }
  },
  disk_used: { bytes: 3 << 20, files: 12 }
};

function file(path: string, size = 10): IWorkspaceFile {
  return { path, size, link: false, modified: '2026-01-01T00:00:00+00:00' };
}

function panelWith(files: IWorkspaceFile[], cells: ICellCost[] = []): { panel: SessionPanel; model: SessionModel } {
  const model = new SessionModel({ send: () => undefined });
  model.info = INFO;
  model.files = files;
  model.cells = cells;
  const panel = new SessionPanel();
  panel.setModel(model);
  return { panel, model };
}

const text = (node: Element | null): string => node?.textContent ?? '';

describe('SessionPanel', () => {
  it('says the kernel is shut down, not that it is another kernel', () => {
    const panel = new SessionPanel();
    panel.showNone('shut-down');
    expect(text(panel.node)).toContain('The kernel is shut down. Start it again to see the sandbox.');
    expect(text(panel.node)).not.toContain('not the WebAssembly sandbox');
  });

  it('keeps long values on one line with the whole value in the title', () => {
    const { panel } = panelWith([file('a.txt')]);
    const notebook = panel.node.querySelector('.jp-WasmSessionPanel-notebook') as HTMLElement;
    expect(notebook.textContent).toBe(INFO.notebook);
    expect(notebook.title).toBe(INFO.notebook);
    expect(text(panel.node.querySelector('.jp-WasmSessionPanel-quota-used'))).toBe('3 MiB of 1 GiB');
  });

  it('gives the limits and the last cells column headers, in human units', () => {
    const cells: ICellCost[] = [
      { execution_count: 6, metering: 'time', fuel_used: 0, cpu_ms: 1200, memory_peak_bytes: 561 << 20,
        duration_ms: 1500, memory_growth_bytes: 0, host_ms: 0 },
      { execution_count: 5, metering: 'fuel', fuel_used: 12_033_500_000, cpu_ms: null, memory_peak_bytes: 561 << 20,
        duration_ms: 1400, memory_growth_bytes: 12 << 20, host_ms: 0 },
      { execution_count: 4, metering: 'time', fuel_used: 0, cpu_ms: 0, memory_peak_bytes: 0, duration_ms: 3,
        memory_growth_bytes: 0, host_ms: 3 }
    ];
    const { panel } = panelWith([], cells);
    const heads = (selector: string): string[] =>
      Array.from(panel.node.querySelectorAll(`${selector} th`)).map(th => text(th));
    expect(heads('.jp-WasmSessionPanel-cells')).toEqual(['Cell', 'Time', 'Memory', 'Work']);
    expect(heads('.jp-WasmSessionPanel-limits')).toEqual(['Limit', 'Value', 'At most']);
    const rows = Array.from(panel.node.querySelectorAll('.jp-WasmSessionPanel-cells tbody tr')).map(row =>
      Array.from((row as HTMLTableRowElement).cells).map(cell => text(cell))
    );
    expect(rows).toEqual([
      ['[6]', '1.5 s', '–', '1.2 s'],
      ['[5]', '1.4 s', '+12 MiB', '12 G'],
      ['[4]', '3 ms', '–', 'magics']
    ]);
    expect(text(panel.node.querySelector('tr[data-limit="stdout"]'))).toBe('stdout10 MiB10 MiB');
    // The metering heads the limits: what bounds a cell's work, the operator's choice.
    expect(text(panel.node.querySelector('tr[data-limit="metering"]'))).toBe('meteringtimeoperator');
  });

  it("says in a cell's title what it fetched through the network door", () => {
    const cells: ICellCost[] = [
      { execution_count: 7, metering: 'time', fuel_used: 0, cpu_ms: 15, memory_peak_bytes: 1 << 20, duration_ms: 20,
        memory_growth_bytes: 0, host_ms: 0, network_requests: 2, network_bytes: 3 << 20 }
    ];
    const { panel } = panelWith([], cells);
    const row = panel.node.querySelector('.jp-WasmSessionPanel-cells tbody tr') as HTMLElement;
    expect(row.title).toContain('fetched 3 MiB in 2 requests');
  });

  it('puts the last cells above the files', () => {
    const { panel } = panelWith([file('a.txt')]);
    const sections = Array.from(panel.node.querySelectorAll('.jp-WasmSessionPanel-section')).map(
      section => text(section.querySelector('.jp-WasmSessionPanel-sectionLabel'))
    );
    expect(sections.indexOf('Last cells')).toBeLessThan(sections.indexOf('Files in /app'));
  });

  it('lists a few files flat, and folders open', () => {
    const { panel } = panelWith([file('a.txt'), file('out/b.csv'), file('out/c.csv')]);
    expect(panel.node.querySelector('.jp-WasmSessionPanel-fileSummary')).toBeNull();
    const folder = panel.node.querySelector('details[data-folder="out"]') as HTMLDetailsElement;
    expect(folder.open).toBe(true);
    expect(folder.querySelectorAll('.jp-WasmSessionPanel-file').length).toBe(2);
    expect(text(folder.querySelector('[data-path="out/b.csv"] .jp-WasmSessionPanel-name'))).toBe('b.csv');
    expect(panel.node.querySelector('.jp-WasmSessionPanel-fileList > [data-path="a.txt"]')).not.toBeNull();
  });

  it('summarises 305 files by folder, collapsed, and points at the Sandbox drive', () => {
    const files = [
      ...Array.from({ length: 300 }, (_, i) => file(`out/part-${i}.csv`, 100)),
      ...Array.from({ length: 5 }, (_, i) => file(`top-${i}.txt`, 1))
    ];
    const { panel } = panelWith(files);
    expect(text(panel.node.querySelector('.jp-WasmSessionPanel-fileSummary'))).toBe('305 files, 29.3 KiB in 1 folder');
    expect(text(panel.node.querySelector('.jp-WasmSessionPanel-driveHint'))).toContain('"Sandbox" drive');
    const folders = Array.from(panel.node.querySelectorAll('details.jp-WasmSessionPanel-folder')) as HTMLDetailsElement[];
    expect(folders.map(f => f.dataset.folder)).toEqual(['', 'out']);
    expect(folders.every(f => !f.open)).toBe(true);
    // Nothing drawn for a closed folder: no 305 rows with two buttons each.
    expect(panel.node.querySelectorAll('.jp-WasmSessionPanel-file').length).toBe(0);
    expect(text(folders[1].querySelector('summary'))).toContain('300 files, 29.3 KiB');
  });

  it('remembers a folder the user opened across redraws', () => {
    const files = Array.from({ length: 60 }, (_, i) => file(`out/f${i}`));
    const { panel } = panelWith(files);
    const folder = panel.node.querySelector('details[data-folder="out"]') as HTMLDetailsElement;
    folder.open = true;
    folder.dispatchEvent(new Event('toggle'));
    expect(folder.querySelectorAll('.jp-WasmSessionPanel-file').length).toBe(60);
    panel.render();
    const again = panel.node.querySelector('details[data-folder="out"]') as HTMLDetailsElement;
    expect(again.open).toBe(true);
    expect(again.querySelectorAll('.jp-WasmSessionPanel-file').length).toBe(60);
  });

  it('never draws a file name as HTML', () => {
    const path = '<img src=x onerror=alert(1)>.txt';
    const { panel } = panelWith([file(path)]);
    expect(panel.node.querySelector('img')).toBeNull();
    expect(text(panel.node.querySelector('.jp-WasmSessionPanel-file .jp-WasmSessionPanel-name'))).toBe(path);
  });

  it('asks through a JupyterLab dialog before deleting: Cancel keeps the file, Delete removes it', async () => {
    const { panel, model } = panelWith([file('keep.txt')]);
    const removed: string[] = [];
    model.remove = async (path: string) => {
      removed.push(path);
    };
    const dialog = showDialog as jest.Mock;
    const button = panel.node.querySelector('[data-path="keep.txt"] .jp-WasmSessionPanel-delete') as HTMLButtonElement;

    dialog.mockResolvedValueOnce({ button: { label: 'Cancel', accept: false } });
    button.click();
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(dialog).toHaveBeenCalledTimes(1);
    const options = dialog.mock.calls[0][0];
    expect(options.body).toContain('keep.txt');
    expect(options.buttons.map((b: { label: string }) => b.label)).toEqual(['Cancel', 'Delete']);
    expect(removed).toEqual([]);

    dialog.mockResolvedValueOnce({ button: { label: 'Delete', accept: true } });
    button.click();
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(removed).toEqual(['keep.txt']);
  });
});

describe('groupByFolder', () => {
  it('puts the top level first, then folders by name, with their sizes', () => {
    const groups = groupByFolder([file('z/a', 1), file('b', 2), file('a/b/c', 3), file('z/b', 4)]);
    expect(groups.map(g => [g.folder, g.files.length, g.bytes])).toEqual([
      ['', 1, 2],
      ['a/b', 1, 3],
      ['z', 2, 5]
    ]);
  });
});
