"""servedrill: tui/screens."""
