# nbgrader's configuration for the example course (run nbgrader from this folder).
# The grading kernel is wasm-python: every submission runs in its own WebAssembly
# sandbox, with the limits of the kernel's own configuration (grading/jupyter_config.py).
c = get_config()  # noqa: F821 (traitlets provides it)

c.CourseDirectory.course_id = "wasm-101"

# The kernel every submission is graded on, whatever its notebook's metadata says
# (nbgrader also restores the source notebook's kernelspec before executing).
c.Execute.kernel_name = "wasm-python"
# nbgrader's own per-cell timeout (30 s by default) is a backstop: the sandbox's
# deadline (grading/jupyter_config.py) stops a runaway cell first, with a clear line.
c.Execute.timeout = 120
# One attempt: a submission that fails is graded as it failed, not re-run.
c.Execute.execute_retries = 0
