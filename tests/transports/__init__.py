"""Transport tests: the shared conformance test and per-transport tests."""
