"""Request-length traces resampled by telemetry_gen.workload (see README.md for source and license)."""
