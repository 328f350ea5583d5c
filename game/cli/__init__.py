"""The `servedrill` command line: core commands, those grouped by what they drive, and the benchmarks."""
