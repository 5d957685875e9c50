"""User code the benchmark runs: UDF files and the spec pages' handlers."""
