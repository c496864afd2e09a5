"""`wasm-kernel grade`'s work: otter-grader assignments graded in the sandbox.

- autograder.py   the autograder zip, read as data (config, tests, files, requirements)
- test_specs.py   an OK-format test file parsed, never run; its public cases
- safe_zip.py     zips from elsewhere read and extracted within bounds
- submissions.py  the submissions found, and each staged as otter lays one out
- grade_runner.py one submission through nbclient on wasm-python, then its tests
- results.py      the guest's results checked as data; otter's GradingResults from them
"""
