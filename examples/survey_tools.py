"""Helpers for 06-data-folder.ipynb: they sit next to the notebook, as a course's
own module would, and the notebook imports them with a plain `import`."""

CM_PER_UNIT = {"cm": 1.0, "m": 100.0, "in": 2.54}


def to_unit(cm, unit="cm"):
    """A length in centimetres, in `unit` (cm, m or in), rounded for a report."""
    return round(cm / CM_PER_UNIT[unit], 2)


def summarize(survey, unit="cm"):
    """Mean height and arm span per favourite subject, in `unit`."""
    means = survey.groupby("favourite_subject")[["height_cm", "arm_span_cm"]].mean()
    table = means.apply(lambda column: column.map(lambda cm: to_unit(cm, unit)))
    table.columns = [f"height_{unit}", f"arm_span_{unit}"]
    return table.sort_index()
