import './jsdomPolyfills';
import { ICellCost, SessionModel } from '../src/model';
import { cellCostText, SandboxStatus, statusText, statusTooltip } from '../src/status';

const CELL: ICellCost = {
  execution_count: 7,
  metering: 'fuel',
  fuel_used: 12_033_500_000,
  cpu_ms: null,
  memory_peak_bytes: 588_447_744, // the guest's whole memory: 561 MiB
  duration_ms: 1400,
  memory_growth_bytes: 12 << 20,
  host_ms: 200
};

describe('the status text', () => {
  it("shows the cell's memory growth, not the guest's total", () => {
    expect(statusText(false, CELL)).toBe('Sandbox: idle | last cell 1.4 s, +12 MiB');
    expect(statusText(false, CELL)).not.toContain('561');
  });

  it('leaves the memory out when it did not grow, or the kernel does not say', () => {
    expect(cellCostText({ ...CELL, duration_ms: 27, memory_growth_bytes: 0 })).toBe('27 ms');
    expect(cellCostText({ ...CELL, duration_ms: 27, memory_growth_bytes: null, host_ms: null })).toBe('27 ms');
  });

  it('says a cell of host magics only ran magics, instead of "0 ms, 0 B"', () => {
    const magic = { ...CELL, fuel_used: 0, memory_peak_bytes: 0, memory_growth_bytes: 0, duration_ms: 3, host_ms: 3 };
    expect(cellCostText(magic)).toBe('3 ms, magics only');
    // An older kernel: no host time, duration 0.
    expect(cellCostText({ ...magic, duration_ms: 0, host_ms: null, memory_growth_bytes: null })).toBe('magics only');
  });

  it('is only the state before any cell', () => {
    expect(statusText(true, undefined)).toBe('Sandbox: running');
  });

  it('explains itself in a tooltip: time, growth, total memory, instructions, the click', () => {
    const tip = statusTooltip(false, CELL);
    expect(tip).toContain('Last cell [7]: 1.4 s (200 ms of it in host magics)');
    expect(tip).toContain('grew by 12 MiB');
    expect(tip).toContain("the guest's memory is 561 MiB in all");
    expect(tip).toContain('Instructions: 12 G instructions');
    expect(tip).toContain('Click to open the Sandbox panel');
  });

  it('gives CPU time instead of instructions in time metering', () => {
    const timed: ICellCost = { ...CELL, metering: 'time', fuel_used: 0, cpu_ms: 1200 };
    const tip = statusTooltip(false, timed);
    expect(tip).toContain('CPU time: 1.2 s');
    expect(tip).not.toContain('nstructions');
    expect(cellCostText(timed)).toBe('1.4 s, +12 MiB');
    // No guest turn at all: no CPU time, only the magics' host time.
    expect(cellCostText({ ...timed, cpu_ms: 0, duration_ms: 3, host_ms: 3 })).toBe('3 ms, magics only');
  });
});

describe('SandboxStatus', () => {
  it('draws a status bar text item with a title, and a click calls onClick', () => {
    const status = new SandboxStatus();
    const model = new SessionModel({ send: () => undefined });
    model.cells = [CELL];
    status.setModel(model);
    const text = status.node.querySelector('.jp-StatusBar-TextItem');
    expect(text?.textContent).toBe('Sandbox: idle | last cell 1.4 s, +12 MiB');
    expect(status.node.title).toContain('Click to open the Sandbox panel');
    let clicks = 0;
    status.onClick = () => (clicks += 1);
    status.node.click();
    status.node.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
    expect(clicks).toBe(2);
  });

  it('updates as soon as a cell event arrives', () => {
    const status = new SandboxStatus();
    const model = new SessionModel({ send: () => undefined }, 20);
    status.setModel(model);
    model.handle({ event: 'cell', execution_count: 3,
      cost: { fuel_used: 5, memory_peak_bytes: 1 << 30, duration_ms: 65_000, memory_growth_bytes: 1536, host_ms: 0 } });
    expect(status.node.textContent).toBe('Sandbox: idle | last cell 1 min 5 s, +1.5 KiB');
    model.dispose();
  });

  it('is hidden while the settings turn it off, and says so to the status bar', () => {
    const status = new SandboxStatus();
    let asked = 0;
    status.activeChanged.connect(() => (asked += 1));
    status.setModel(new SessionModel({ send: () => undefined }));
    expect(status.active).toBe(true);
    status.setShown(false);
    expect(status.active).toBe(false);
    status.setShown(false); // no change, no signal
    status.setShown(true);
    expect(status.active).toBe(true);
    expect(asked).toBe(3); // the model, off, on
  });

  it('redraws for the model it shows, not for one it showed before', () => {
    const status = new SandboxStatus();
    const first = new SessionModel({ send: () => undefined }, 20);
    const second = new SessionModel({ send: () => undefined }, 20);
    status.setModel(first);
    status.setModel(second);
    first.handle({ event: 'cell', execution_count: 1, cost: { duration_ms: 5000 } });
    expect(status.node.textContent).toBe('Sandbox: idle');
    second.handle({ event: 'cell', execution_count: 2, cost: { duration_ms: 27 } });
    expect(status.node.textContent).toContain('last cell 27 ms');
    first.dispose();
    second.dispose();
  });
});
