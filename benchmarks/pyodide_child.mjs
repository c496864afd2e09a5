// Child process of bench_pyodide.py; not run by hand.
// node pyodide_child.mjs PYODIDE_DIR CELLS_JSON REPEATS ONE_PLUS_ONE_RUNS
// Loads Pyodide (CPython in wasm under node, the peer a user would otherwise pick),
// runs each cell REPEATS times and `1+1` ONE_PLUS_ONE_RUNS times through runPython,
// and prints one JSON line: seconds per run, the load time and the versions.
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";

const [dir, cellsPath, repeatsArg, onesArg] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(`${dir}/node_modules/pyodide/pyodide.mjs`).href);
const cells = JSON.parse(readFileSync(cellsPath, "utf8"));
const repeats = Number(repeatsArg);
const ones = Number(onesArg);

let t = performance.now();
const py = await loadPyodide({ indexURL: `${dir}/node_modules/pyodide/` });
const loadS = (performance.now() - t) / 1000;
const out = { load_s: loadS, cells: {}, one_plus_one_s: [], python: py.runPython("import sys; sys.version.split()[0]"),
              pyodide: py.version, node: process.version, v8: process.versions.v8 };
py.runPython("1+1"); // warm-up
for (const [name, source] of Object.entries(cells)) {
  out.cells[name] = [];
  for (let i = 0; i < repeats; i++) {
    py.runPython("import gc; gc.collect()");
    t = performance.now();
    py.runPython(source);
    out.cells[name].push((performance.now() - t) / 1000);
  }
}
for (let i = 0; i < ones; i++) {
  t = performance.now();
  py.runPython("1+1");
  out.one_plus_one_s.push((performance.now() - t) / 1000);
}
console.log(JSON.stringify(out));
