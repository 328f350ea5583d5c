"""servedrill: incidents."""
