/** A widget that draws a SessionModel, redrawn whenever the model it shows changes. */
import { Widget } from '@lumino/widgets';

import { SessionModel } from './model';

export abstract class ModelView extends Widget {
  setModel(model: SessionModel | null): void {
    this.model = model;
    // A model replaced later (another notebook, a restart) must not draw here any more.
    model?.onChange(() => {
      if (this.model === model) {
        this.render();
      }
    });
    this.render();
  }

  abstract render(): void;

  protected model: SessionModel | null = null;
}
