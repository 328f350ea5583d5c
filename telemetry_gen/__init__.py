"""servedrill: telemetry_gen."""
