/**
 * The Sandbox panel drawn in jsdom. JupyterLab's own widgets (SidePanel, the toolbar,
 * icons) ship as ES modules jest does not load: they are stood in for by
 * small fakes, the panel's DOM and its decisions are what is tested.
 */
/** Each panel's toolbar items by name, as the fake toolbar below was given them. */
const toolbarItems = new WeakMap<object, Map<string, unknown>>();
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
    toolbar = {
      addItem: (name: string, item: unknown): boolean => {
        const items = toolbarItems.get(this) ?? new Map<string, unknown>();
        items.set(name, item);
        toolbarItems.set(this, items);
        return true;
      }
    };
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
    folderIcon: icon,
    refreshIcon: icon
  };
});

import './jsdomPolyfills';

import { ICellCost, IWorkspaceFile, SessionModel } from '../src/model';
import { SessionPanel } from '../src/panel';

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

  it('counts the files and leaves them to the Sandbox files browser, which its button opens', () => {
    const files = [
      ...Array.from({ length: 300 }, (_, i) => file(`out/part-${i}.csv`, 100)),
      ...Array.from({ length: 5 }, (_, i) => file(`top-${i}.txt`, 1))
    ];
    const model = new SessionModel({ send: () => undefined });
    model.info = INFO;
    model.files = files;
    const panel = new SessionPanel();
    let shown = 0;
    panel.onShowFiles = () => (shown += 1);
    panel.setModel(model);
    expect(text(panel.node.querySelector('.jp-WasmSessionPanel-fileSummary'))).toBe('305 files, 29.3 KiB in 1 folder');
    expect(text(panel.node.querySelector('.jp-WasmSessionPanel-driveHint'))).toContain('Sandbox files browser');
    // No rows of its own: the listing, its uploads and deletes are JupyterLab's file browser's.
    expect(panel.node.querySelectorAll('[data-path]').length).toBe(0);
    const button = toolbarItems.get(panel)!.get('files') as unknown as { enabled: boolean; props: { onClick: () => void } };
    expect(button.enabled).toBe(true);
    button.props.onClick();
    expect(shown).toBe(1);
  });

  it('says why there is no Sandbox files browser where there is none, its button off', () => {
    const model = new SessionModel({ send: () => undefined });
    model.info = INFO;
    const panel = new SessionPanel();
    panel.filesElsewhere = 'Sandbox files are not available here: the server extension is off.';
    panel.setModel(model);
    expect(text(panel.node.querySelector('.jp-WasmSessionPanel-fileSummary'))).toBe('No files yet.');
    expect(text(panel.node.querySelector('.jp-WasmSessionPanel-driveHint'))).toBe(panel.filesElsewhere);
    expect((toolbarItems.get(panel)!.get('files') as unknown as { enabled: boolean }).enabled).toBe(false);
  });

  it('never draws a name as HTML', () => {
    const model = new SessionModel({ send: () => undefined });
    model.info = { ...INFO, notebook: '<img src=x onerror=alert(1)>.ipynb' };
    const panel = new SessionPanel();
    panel.setModel(model);
    expect(panel.node.querySelector('img')).toBeNull();
    expect(text(panel.node.querySelector('.jp-WasmSessionPanel-notebook'))).toBe('<img src=x onerror=alert(1)>.ipynb');
  });
});
