"""A small data-science course written for the tests (tests/e2e/test_course.py), in the
style of a university course's published labs: `from datascience import *`, otter's
checks stored in the notebook's metadata (as `otter assign` does with tests in the
notebook), data files beside it, answers checked with `grader.check("q...")`, a
wrong answer among them, `grader.check_all()` and `grader.export(...)` at the end.
The notebook is the student's, unchanged: the same file runs on both kernels."""

from __future__ import annotations

from pathlib import Path

import nbformat

CITIES = """city,country,population,area
Lagos,Nigeria,15388000,1171
Cairo,Egypt,10230000,3085
Lima,Peru,9751000,2672
Oslo,Norway,709037,454
Perth,Australia,2192000,6418
Quito,Ecuador,2011000,372
Porto,Portugal,231800,41
Accra,Ghana,2557000,225
"""

TRIPS = """city,year,visitors
Lagos,2022,120
Lagos,2023,150
Oslo,2022,300
Oslo,2023,280
Lima,2023,90
"""


def _ok_test(name: str, *cases: str, points: int = 1) -> dict[str, object]:
    """An OK-format test as otter stores it in a notebook's metadata."""
    return {
        "name": name, "points": points,
        "suites": [{"type": "doctest", "scored": True, "setup": "", "teardown": "",
                    "cases": [{"code": code, "hidden": False, "locked": False} for code in cases]}],
    }


TESTS = {
    "q1": _ok_test("q1", ">>> total_population\n43069837", ">>> isinstance(total_population, (int, np.integer))\nTrue"),
    "q2": _ok_test("q2", ">>> largest\n'Lagos'"),
    "q3": _ok_test("q3", ">>> round(mean_area, 1)\n1804.8"),  # the student's answer below is wrong
    "q4": _ok_test("q4", ">>> dense.num_rows\n4",
                   ">>> list(dense.column('city'))\n['Lagos', 'Quito', 'Porto', 'Accra']"),
    "q5": _ok_test("q5", ">>> visits.num_rows\n3", ">>> int(visits.column('visitors sum').item(0))\n90"),
}

# (kind, source): the lab's cells in order. A grader.check cell's verdict must be
# ipykernel's; the test counts every code cell.
CELLS: list[tuple[str, str]] = [
    ("code", '# Initialize Otter\nimport otter\ngrader = otter.Notebook("lab01.ipynb")'),
    ("markdown", "# Lab 1: Cities\n\nWelcome to Lab 1. Run each cell in order."),
    ("code", "from datascience import *\nimport numpy as np\n%matplotlib inline"),
    ("code", 'cities = Table.read_table("data/cities.csv")\ncities'),
    ("code", "cities.num_rows, cities.labels"),
    ("code", 'cities.column("population")'),
    ("markdown", "**Question 1.** What is the total population of these cities?"),
    ("code", 'total_population = sum(cities.column("population"))\ntotal_population'),
    ("code", 'grader.check("q1")'),
    ("markdown", "**Question 2.** Which city is the largest?"),
    ("code", 'largest = cities.sort("population", descending=True).column("city").item(0)\nlargest'),
    ("code", 'grader.check("q2")'),
    ("markdown", "**Question 3.** What is the mean area?"),
    ("code", 'mean_area = np.median(cities.column("area"))  # a student\'s slip: the median\nmean_area'),
    ("code", 'grader.check("q3")'),
    ("code", 'with_density = cities.with_column("density", cities.column("population") / cities.column("area"))\n'
             'with_density.set_format("density", NumberFormatter(decimals=1))\nwith_density.show(3)'),
    ("markdown", "**Question 4.** Which cities have more than 5,000 people per square kilometre?"),
    ("code", 'dense = with_density.where("density", are.above(5000)).select("city", "density")\ndense'),
    ("code", 'grader.check("q4")'),
    ("code", 'trips = Table.read_table("data/trips.csv")\ntrips.pivot("year", "city", "visitors", sum)'),
    ("markdown", "**Question 5.** Total visitors per city, smallest first."),
    ("code", 'visits = trips.group("city", sum).sort("visitors sum").select("city", "visitors sum")\nvisits'),
    ("code", 'grader.check("q5")'),
    ("code", 'np.round(np.std(cities.column("area")), 2), cities.column("area").mean()'),
    ("code", 'make_array(1, 2, 3) * 2, np.arange(0, 10, 3)'),
    ("code", 'percentile(50, cities.column("population"))'),
    ("code", 'cities.column("nope")'),  # a student's typo: the library's error, as on ipykernel
    ("code", "grader.check_all()"),
    ("code", "grader.export(pdf=False, run_tests=True)"),
]


def write_course(folder: Path) -> Path:
    """The course's folder: lab01.ipynb (tests in its metadata) and its data. Returns the notebook."""
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "cities.csv").write_text(CITIES)
    (folder / "data" / "trips.csv").write_text(TRIPS)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["otter"] = {"OK_FORMAT": True, "tests": TESTS}
    nb.cells = [nbformat.v4.new_code_cell(src) if kind == "code" else nbformat.v4.new_markdown_cell(src)
                for kind, src in CELLS]
    path = folder / "lab01.ipynb"
    nbformat.write(nb, path)
    return path


def code_cells() -> list[str]:
    return [src for kind, src in CELLS if kind == "code"]
