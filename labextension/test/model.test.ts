import { parseCellCost, SessionModel } from '../src/model';

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

  it('asks for the disk use again after each cell, and downloads bytes sent as base64', async () => {
    const { model, sent } = modelWith({
      info: () => INFO,
      files: () => ({ ok: true, files: [], cut: null }),
      read: () => ({ ok: true, data: btoa(String.fromCharCode(0, 1, 2, 255, 254)) })
    });
    await model.refresh();
    const before = sent.filter(s => s.op === 'info').length;
    model.handle({ event: 'cell', execution_count: 1, cost: {} });
    await new Promise(resolve => setTimeout(resolve, 10));
    expect(sent.filter(s => s.op === 'info').length).toBe(before + 1);
    expect(Array.from(await model.download('b.bin'))).toEqual([0, 1, 2, 255, 254]);
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
