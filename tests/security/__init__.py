"""The adversarial suite (issue 10): a package, so its conftest is not tests/conftest."""
