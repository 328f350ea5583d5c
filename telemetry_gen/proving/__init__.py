"""Proving incidents: the worlds each hypothesis is simulated as, what a query's result shows (evidence), and the
claim proofs, their records, reports and worker pool."""
