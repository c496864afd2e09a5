/** A widget that draws a SessionModel, redrawn whenever the model it shows changes. */
import { Widget } from '@lumino/widgets';

import { SessionModel } from './model';

export abstract class ModelView extends Widget {
  setModel(model: SessionModel | null): void {
    // A model replaced (another notebook, a restart) draws here no more.
    this.model?.changed.disconnect(this._redraw, this);
    this.model = model;
    model?.changed.connect(this._redraw, this);
    this.render();
  }

  abstract render(): void;

  private _redraw(): void {
    this.render();
  }

  protected model: SessionModel | null = null;
}
