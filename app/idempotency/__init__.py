"""Idempotency-Key: a retried write answers what its first try answered."""
