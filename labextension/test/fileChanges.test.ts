import { DOWNLOAD_EVENT, formatSize, parseFileChanges, renderFileChanges } from '../src/fileChanges';

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
  it.each([
    [null, ''],
    [0, '0 B'],
    [1023, '1023 B'],
    [1536, '1.5 KiB'],
    [5 * 1024 * 1024, '5.0 MiB']
  ])('%p -> %p', (size, text) => {
    expect(formatSize(size)).toBe(text);
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

  it('caps the rows and says how many more there are', () => {
    const node = document.createElement('div');
    const created = Array.from({ length: 250 }, (_, i) => ({ path: `f${i}`, size: i }));
    renderFileChanges(node, { created, modified: [], deleted: [] });
    expect(node.querySelectorAll('tr').length).toBe(200);
    expect(node.querySelector('.jp-WasmFileChanges-more')?.textContent).toBe('and 50 more');
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
    document.addEventListener(DOWNLOAD_EVENT, event => asked.push((event as CustomEvent).detail.path));
    const links = node.querySelectorAll('a.jp-WasmFileChanges-download');
    expect(links.length).toBe(1);
    (links[0] as HTMLAnchorElement).click();
    expect(asked).toEqual(['out/data.csv']);
  });
});
