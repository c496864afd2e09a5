import {
  formatCount,
  formatDuration,
  formatInstructions,
  formatSize,
  parseFileChanges,
  renderFileChanges,
  summarizeChanges
} from '../src/fileChanges';
import { downloadRequested } from '../src/events';

describe('parseFileChanges', () => {
  it('keeps what the kernel sends and drops sizes of deleted files', () => {
    const parsed = parseFileChanges({
      execution_count: 3,
      created: [{ path: 'a.txt', size: 5 }],
      modified: [{ path: 'b.csv', size: null }],
      deleted: [{ path: 'c.bin', size: 9 }]
    });
    expect(parsed).toEqual({
      created: [{ path: 'a.txt', size: 5 }],
      modified: [{ path: 'b.csv', size: null }],
      deleted: [{ path: 'c.bin', size: null }]
    });
  });

  it.each([null, 'text', 42, { created: 'x' }, { created: [{ size: 1 }] }, { deleted: [null] }])(
    'refuses a malformed list: %p',
    data => {
      expect(parseFileChanges(data)).toBeNull();
    }
  );

  it('treats missing kinds as empty and odd sizes as unknown', () => {
    expect(parseFileChanges({ created: [{ path: 'x', size: -1 }] })).toEqual({
      created: [{ path: 'x', size: null }],
      modified: [],
      deleted: []
    });
  });
});

describe('formatSize', () => {
  // As the kernel's %files and %limits write sizes: three significant digits.
  it.each([
    [null, ''],
    [undefined, ''],
    [0, '0 B'],
    [22, '22 B'],
    [1023, '1023 B'],
    [1024, '1 KiB'],
    [1536, '1.5 KiB'],
    [1500, '1.46 KiB'],
    [5 * 1024 * 1024, '5 MiB'],
    [12.34 * 1024 * 1024, '12.3 MiB'],
    [588_447_744, '561 MiB'],
    [1024 * 1024 - 1, '1 MiB'], // not "1024 KiB"
    [3 * 1024 ** 3, '3 GiB']
  ])('%p -> %p', (size, text) => {
    expect(formatSize(size)).toBe(text);
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0 ms'],
    [0.4, '<1 ms'],
    [27, '27 ms'],
    [27.6, '28 ms'],
    [999.4, '999 ms'],
    [999.6, '1 s'],
    [1400, '1.4 s'],
    [2000, '2 s'],
    [9960, '10 s'],
    [42_300, '42 s'],
    [59_700, '1 min'],
    [123_000, '2 min 3 s'],
    [3_600_000, '1 h'],
    [3_900_000, '1 h 5 min'],
    [null, ''],
    [-1, '']
  ])('%p ms -> %p', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});

describe('instructions', () => {
  it.each([
    [0, '0'],
    [950, '950'],
    [3_600, '3.6 k'],
    [29_900_000, '29.9 M'],
    [999_999_999, '1 G'],
    [12_033_500_000, '12 G'],
    [5e11, '500 G'],
    [5e12, '5 T']
  ])('%p -> %p', (fuel, text) => {
    expect(formatCount(fuel)).toBe(text);
  });

  it('says what the fuel counts, not "M fuel"', () => {
    expect(formatInstructions(12_033_500_000)).toBe('12 G instructions');
  });
});

describe('renderFileChanges', () => {
  it('draws one row per change with the summary first', () => {
    const node = document.createElement('div');
    renderFileChanges(node, {
      created: [{ path: 'new.txt', size: 22 }],
      modified: [],
      deleted: [{ path: 'old.txt', size: null }]
    });
    expect(node.querySelector('.jp-WasmFileChanges-summary')?.textContent).toBe('Files: 1 created, 1 deleted');
    const rows = Array.from(node.querySelectorAll('tr')).map(row =>
      Array.from(row.cells).map(cell => cell.textContent)
    );
    expect(rows).toEqual([
      ['created', 'new.txt', '22 B'],
      ['deleted', 'old.txt', '']
    ]);
    expect(node.querySelector('tr.jp-WasmFileChanges-created')?.getAttribute('data-path')).toBe('new.txt');
  });

  it('never interprets a path as HTML', () => {
    const node = document.createElement('div');
    const path = '<img src=x onerror=alert(1)>.txt';
    renderFileChanges(node, { created: [{ path, size: 1 }], modified: [], deleted: [] });
    expect(node.querySelector('img')).toBeNull();
    expect(node.querySelector('td:nth-child(2)')?.textContent).toBe(path);
  });

  it('lists 20 changes as they are', () => {
    const node = document.createElement('div');
    const created = Array.from({ length: 20 }, (_, i) => ({ path: `out/f${i}`, size: i }));
    renderFileChanges(node, { created, modified: [], deleted: [] });
    expect(node.querySelectorAll('.jp-WasmFileChanges-table tr').length).toBe(20);
    expect(node.querySelector('details')).toBeNull();
    expect(node.querySelector('.jp-WasmFileChanges-folders')).toBeNull();
  });

  it('summarises more than 20 changes per kind and folder, the list collapsed behind them', () => {
    const node = document.createElement('div');
    const created = [
      ...Array.from({ length: 250 }, (_, i) => ({ path: `out/part-${i}.csv`, size: 100 })),
      ...Array.from({ length: 40 }, (_, i) => ({ path: `data/raw/r${i}.bin`, size: 1000 }))
    ];
    const modified = [{ path: 'notes.txt', size: 5 }];
    const deleted = [{ path: 'out/old.csv', size: null }];
    renderFileChanges(node, { created, modified, deleted });
    expect(node.querySelector('.jp-WasmFileChanges-summary')?.textContent).toBe(
      'Files: 290 created, 1 modified, 1 deleted'
    );
    const folders = Array.from(node.querySelectorAll('.jp-WasmFileChanges-folders tbody tr')).map(row =>
      Array.from((row as HTMLTableRowElement).cells).map(cell => cell.textContent)
    );
    // By top-level folder, as the kernel's own summary.
    expect(folders).toEqual([
      ['out/', '250', '', '1', '24.4 KiB'],
      ['data/', '40', '', '', '39.1 KiB'],
      ['./', '', '1', '', '5 B']
    ]);
    const heads = Array.from(node.querySelectorAll('.jp-WasmFileChanges-folders th')).map(th => th.textContent);
    expect(heads).toEqual(['Folder', 'Created', 'Modified', 'Deleted', 'Size']);
    // The list: behind a <details>, closed, at most 200 rows.
    const details = node.querySelector('details.jp-WasmFileChanges-details') as HTMLDetailsElement;
    expect(details.open).toBe(false);
    expect(details.querySelector('summary')?.textContent).toBe('List the first 200 of 292 files');
    expect(details.querySelectorAll('tr').length).toBe(200);
    expect(details.querySelector('.jp-WasmFileChanges-more')?.textContent).toBe('and 92 more');
  });

  it("uses the kernel's summary when it sends one (its lists may be cut)", () => {
    const node = document.createElement('div');
    const changes = parseFileChanges({
      created: Array.from({ length: 30 }, (_, i) => ({ path: `out/f${i}`, size: 1 })),
      modified: [],
      deleted: [],
      summary: {
        total: 1200,
        created: 1150,
        modified: 50,
        deleted: 0,
        folders: [
          { folder: 'out', created: 1000, modified: 0, deleted: 0, bytes: 1000 },
          { folder: 'logs', created: 150, modified: 50, deleted: 0, bytes: 2048 }
        ],
        more_folders: 0
      }
    })!;
    renderFileChanges(node, changes);
    expect(node.querySelector('.jp-WasmFileChanges-summary')?.textContent).toBe('Files: 1,150 created, 50 modified');
    const folders = Array.from(node.querySelectorAll('.jp-WasmFileChanges-folders tbody tr')).map(
      row => (row as HTMLTableRowElement).cells[0].textContent
    );
    expect(folders).toEqual(['out/', 'logs/']);
    expect(node.querySelector('details summary')?.textContent).toBe('List the first 30 of 1,200 files');
  });

  it('says how many folders it left out', () => {
    const node = document.createElement('div');
    const created = Array.from({ length: 30 }, (_, i) => ({ path: `d${i}/f`, size: 1 }));
    renderFileChanges(node, { created, modified: [], deleted: [] });
    expect(node.querySelectorAll('.jp-WasmFileChanges-folders tbody tr[data-folder]').length).toBe(10);
    expect(node.querySelector('.jp-WasmFileChanges-moreFolders')?.textContent).toBe('and 20 more folders');
    // The kernel's summary names up to 50 folders and counts the rest: ten shown, the rest counted.
    const folders = Array.from({ length: 50 }, (_, i) => ({ folder: `d${i}`, created: 1, modified: 0, deleted: 0, bytes: 1 }));
    renderFileChanges(node, { ...parseFileChanges({ created })!, summary: { total: 60, folders, more_folders: 10, kinds: null } });
    expect(node.querySelector('.jp-WasmFileChanges-moreFolders')?.textContent).toBe('and 50 more folders');
  });

  it('ignores a summary of the wrong shape and computes its own', () => {
    const created = Array.from({ length: 25 }, (_, i) => ({ path: `x/f${i}`, size: 1 }));
    const parsed = parseFileChanges({ created, summary: { total: 'lots', folders: [] } })!;
    expect(parsed.summary).toBeUndefined();
    expect(summarizeChanges(parsed)).toEqual({
      total: 25,
      folders: [{ folder: 'x', created: 25, modified: 0, deleted: 0, bytes: 25 }],
      more_folders: 0,
      kinds: { created: 25, modified: 0, deleted: 0 }
    });
  });

  it('never interprets a folder name as HTML', () => {
    const node = document.createElement('div');
    const folder = '<img src=x onerror=alert(1)>';
    const created = Array.from({ length: 25 }, (_, i) => ({ path: `${folder}/f${i}`, size: 1 }));
    renderFileChanges(node, { created, modified: [], deleted: [] });
    expect(node.querySelector('img')).toBeNull();
    expect(node.querySelector('.jp-WasmFileChanges-folders td')?.textContent).toBe(`${folder}/`);
  });
});

describe('download links', () => {
  it('a created file name asks for a download with its path; a deleted one has no link', () => {
    const node = document.createElement('div');
    document.body.appendChild(node);
    renderFileChanges(node, {
      created: [{ path: 'out/data.csv', size: 3 }],
      modified: [],
      deleted: [{ path: 'gone.txt', size: null }]
    });
    const asked: string[] = [];
    downloadRequested.connect((_, request) => asked.push(request.path));
    const links = node.querySelectorAll('a.jp-WasmFileChanges-download');
    expect(links.length).toBe(1);
    (links[0] as HTMLAnchorElement).click();
    expect(asked).toEqual(['out/data.csv']);
  });
});
