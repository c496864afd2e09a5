/**
 * The names the extension shares with the kernel (wasm_kernel's kernelspec and its
 * file-change display), said once.
 */

/** The kernelspec's name (kernelspec/kernel.json): a notebook on it is sandboxed. */
export const KERNEL_NAME = 'wasm-python';

/** The MIME type of the per-cell file-change list the kernel displays. */
export const FILE_CHANGES_MIME = 'application/vnd.wasm-kernel.file-changes+json';

/** Whether a kernel (or its spec) is the sandboxed one. */
export function isSandboxKernel(kernel: { readonly name?: unknown } | null | undefined): boolean {
  return kernel?.name === KERNEL_NAME;
}
