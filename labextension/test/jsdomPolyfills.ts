/** What jsdom lacks and @lumino/widgets needs at load time (its drag and drop). Import
 * this first in a test that loads the widgets. */
if (typeof (globalThis as { DragEvent?: unknown }).DragEvent === 'undefined') {
  (globalThis as { DragEvent?: unknown }).DragEvent = class DragEvent extends MouseEvent {};
}
export {};
