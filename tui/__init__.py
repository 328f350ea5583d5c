"""servedrill: tui."""
