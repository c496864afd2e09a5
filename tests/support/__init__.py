"""What the tests share and are not tests: kernel and server clients, the pool's
processes, Redis, the grading course, wheelhouses, the adversarial suite's harness.

pyproject's `pythonpath` puts tests/ on sys.path, so a test imports them as
`from support.kernel_client import RunningKernel`; a benchmark that uses them puts
tests/ on its own sys.path first (benchmarks/bench_soak.py)."""
