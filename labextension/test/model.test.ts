import { base64ToBytes, bytesToBase64, parseCellCost, SessionModel } from '../src/model';

/** Answers requests as the kernel's session target would, from a table of ops. */
function modelWith(answers: Record<string, (req: Record<string, unknown>) => Record<string, unknown>>) {
  const sent: Record<string, unknown>[] = [];
  const model: SessionModel = new SessionModel({
    send: data => {
      sent.push(data);
      const op = data.op as string;
      const answer = answers[op] ? answers[op](data) : { ok: false, error: `unknown op '${op}'` };
      setTimeout(() => model.handle({ id: data.id, ...answer }), 0);
    }
  });
  return { model, sent };
}

const INFO = {
  ok: true,
  session_id: 'c667ae75-9d0b-4513-8b67-8979c4bd01c0',
  notebook: 'probe.ipynb',
  workspace: '/app',
  limits: { memory: { value: 1, at_most: 2, shown: '1 B', at_most_shown: '2 B' } },
  disk_used: { bytes: 10, files: 1 }
};

describe('SessionModel', () => {
  it('matches answers to requests by id and fills in the session and its files', async () => {
    const { model, sent } = modelWith({
      info: () => INFO,
      files: () => ({ ok: true, files: [{ path: 'a.txt', size: 3, link: false, modified: 'now' }], cut: null })
    });
    let changes = 0;
    model.changed.connect(() => (changes += 1));
    await model.refresh();
    expect(sent.map(s => s.op)).toEqual(['info', 'files']);
    expect(new Set(sent.map(s => s.id)).size).toBe(2);
    expect(model.info?.session_id).toBe(INFO.session_id);
    expect(model.files.map(f => f.path)).toEqual(['a.txt']);
    expect(model.error).toBeNull();
    expect(changes).toBe(1);
  });

  it('turns a refused request into an error the panel shows', async () => {
    const { model } = modelWith({ info: () => ({ ok: false, error: 'the kernel said no' }) });
    await model.refresh();
    expect(model.error).toBe('the kernel said no');
    await expect(model.request('nonsense')).rejects.toThrow("unknown op 'nonsense'");
  });

  it('keeps the last cells newest first and refreshes after each', async () => {
    const { model, sent } = modelWith({ info: () => INFO, files: () => ({ ok: true, files: [], cut: null }) });
    for (let n = 1; n <= 12; n++) {
      model.handle({ event: 'cell', execution_count: n, cost: { fuel_used: n, memory_peak_bytes: 1, duration_ms: 2 } });
    }
    await new Promise(resolve => setTimeout(resolve, 10));
    expect(model.cells.map(c => c.execution_count)).toEqual([12, 11, 10, 9, 8, 7, 6, 5, 4, 3]);
    expect(sent.filter(s => s.op === 'info').length).toBeGreaterThan(0);
  });

  it("shows the kernel's last cells when it binds, as after a switch between notebooks", async () => {
    const cells = [3, 2, 1].map(n => ({ execution_count: n, cost: { cpu_ms: n, duration_ms: 2 * n } }));
    const { model } = modelWith({ info: () => ({ ...INFO, cells }), files: () => ({ ok: true, files: [], cut: null }) });
    expect(model.cells).toEqual([]);
    await model.refresh();
    expect(model.cells.map(c => c.execution_count)).toEqual([3, 2, 1]);
    expect(model.cells[0].duration_ms).toBe(6);
  });

  it('tells the Sandbox files browser after an upload and a delete', async () => {
    const { workspaceChanged } = await import('../src/events');
    let told = 0;
    const listener = () => (told += 1);
    workspaceChanged.connect(listener);
    const { model } = modelWith({
      info: () => INFO, files: () => ({ ok: true, files: [], cut: null }),
      write: () => ({ ok: true }), delete: () => ({ ok: true })
    });
    await model.refresh();
    await model.upload('a.txt', new Uint8Array([1, 2, 3]));
    await model.remove('a.txt');
    workspaceChanged.disconnect(listener);
    expect(told).toBe(2);
  });

  it("reads a cell's memory growth and host time, and does without them from older kernels", () => {
    const { model } = modelWith({ info: () => INFO, files: () => ({ ok: true, files: [], cut: null }) });
    let changes = 0;
    model.changed.connect(() => (changes += 1));
    model.handle({ event: 'cell', execution_count: 2,
      cost: { fuel_used: 9, memory_peak_bytes: 600 << 20, duration_ms: 1400, memory_growth_bytes: 12 << 20, host_ms: 3 } });
    expect(model.cells[0]).toEqual({ execution_count: 2, metering: 'fuel', fuel_used: 9, cpu_ms: null,
      memory_peak_bytes: 600 << 20, duration_ms: 1400, memory_growth_bytes: 12 << 20, host_ms: 3, network_requests: null,
      network_bytes: null });
    expect(changes).toBe(1); // at once, before the refresh is answered
    expect(parseCellCost(1, { fuel_used: 9, memory_peak_bytes: 5, duration_ms: 2 })).toEqual({
      execution_count: 1, metering: 'fuel', fuel_used: 9, cpu_ms: null, memory_peak_bytes: 5, duration_ms: 2,
      memory_growth_bytes: null, host_ms: null, network_requests: null, network_bytes: null });
    // Time metering: CPU time, and no fuel (null from the kernel).
    expect(parseCellCost(3, { metering: 'time', fuel_used: null, cpu_ms: 1200.5, duration_ms: 1400 })).toMatchObject({
      metering: 'time', fuel_used: 0, cpu_ms: 1200.5 });
    expect(parseCellCost(2, { fuel_used: 1, network_requests: 2, network_bytes: 2048 })).toMatchObject({
      network_requests: 2, network_bytes: 2048 });
    expect(parseCellCost(1, { memory_growth_bytes: 'lots', host_ms: -1 })).toMatchObject({
      fuel_used: 0, memory_growth_bytes: null, host_ms: null });
  });

  it('asks for the disk use again after an upload, a delete and each cell', async () => {
    let used = 10;
    const { model, sent } = modelWith({
      info: () => ({ ...INFO, disk_used: { bytes: used, files: 1 } }),
      files: () => ({ ok: true, files: [], cut: null }),
      write: () => {
        used += 5;
        return { ok: true };
      },
      delete: req => {
        used -= 5;
        return { ok: true, path: req.path };
      }
    });
    await model.refresh();
    await model.upload('a.bin', new Uint8Array(5));
    expect(model.info?.disk_used?.bytes).toBe(15);
    await model.remove('a.bin');
    expect(model.info?.disk_used?.bytes).toBe(10);
    await model.remove('out', true);
    expect(sent.filter(s => s.op === 'delete').map(s => s.recursive)).toEqual([undefined, true]);
    const before = sent.filter(s => s.op === 'info').length;
    model.handle({ event: 'cell', execution_count: 1, cost: {} });
    await new Promise(resolve => setTimeout(resolve, 10));
    expect(sent.filter(s => s.op === 'info').length).toBe(before + 1);
  });

  it('uploads bytes as base64 and downloads them back', async () => {
    const stored: Record<string, string> = {};
    const { model } = modelWith({
      write: req => {
        stored[req.path as string] = req.data as string;
        return { ok: true };
      },
      read: req => ({ ok: true, data: stored[req.path as string] }),
      info: () => INFO,
      files: () => ({ ok: true, files: [], cut: null })
    });
    const bytes = new Uint8Array([0, 1, 2, 255, 254]);
    await model.upload('b.bin', bytes);
    expect(Array.from(await model.download('b.bin'))).toEqual([0, 1, 2, 255, 254]);
  });

  it('uploads in parts that each fit a websocket message, numbered as JupyterLab numbers chunks', async () => {
    const parts: { part: number; size: number; length: number }[] = [];
    let stored = new Uint8Array(0);
    const { model } = modelWith({
      info: () => ({ ...INFO, uploads: { max_bytes: 64 << 10, part_bytes: 16 << 10 } }),
      files: () => ({ ok: true, files: [], cut: null }),
      write: req => {
        const bytes = base64ToBytes(req.data as string);
        parts.push({ part: req.part as number, size: req.size as number, length: bytes.length });
        const before = req.part === 1 ? new Uint8Array(0) : stored; // 1 starts the file, later parts append
        const grown = new Uint8Array(before.length + bytes.length);
        grown.set(before);
        grown.set(bytes, before.length);
        stored = grown;
        return { ok: true };
      }
    });
    await model.refresh();
    const exactly = new Uint8Array(64 << 10).map((_, i) => i % 251); // the maximum, exactly
    await model.upload('big.bin', exactly);
    expect(parts.map(p => p.part)).toEqual([1, 2, 3, -1]);
    expect(parts.every(p => p.length === 16 << 10 && p.size === 64 << 10)).toBe(true);
    expect(stored.length).toBe(exactly.length);
    expect(stored.every((byte, i) => byte === exactly[i])).toBe(true);
    parts.length = 0;
    await model.upload('small.bin', new Uint8Array(3));
    expect(parts.map(p => p.part)).toEqual([1]); // one part: the whole file
  });

  it('refuses a file over the maximum before sending any of it, in the kernel\'s words', async () => {
    const writes: Record<string, unknown>[] = [];
    const { model } = modelWith({
      info: () => ({ ...INFO, uploads: { max_bytes: 16 << 20, part_bytes: 4 << 20 } }),
      files: () => ({ ok: true, files: [], cut: null }),
      write: req => {
        writes.push(req);
        return { ok: false, error: 'big.bin is 16.0 MiB and 1 byte over; the panel uploads files up to 16 MiB' };
      }
    });
    await model.refresh();
    await expect(model.upload('big.bin', new Uint8Array((16 << 20) + 1))).rejects.toThrow('up to 16 MiB');
    expect(writes).toHaveLength(1);
    expect(writes[0].data).toBe('');
  });

  it('ends a request the kernel never answers with a message', async () => {
    const model = new SessionModel({ send: () => undefined }, 20);
    await expect(model.request('info')).rejects.toThrow('did not answer within');
  });

  it('rejects what is pending when the kernel goes away', async () => {
    const model = new SessionModel({ send: () => undefined });
    const pending = model.request('info');
    model.dispose();
    await expect(pending).rejects.toThrow('the kernel went away');
  });
});

describe('base64', () => {
  it('round-trips large byte arrays', () => {
    const bytes = new Uint8Array(200_000).map((_, i) => i % 256);
    expect(base64ToBytes(bytesToBase64(bytes))).toEqual(bytes);
  });
});
