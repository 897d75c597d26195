"""Test helpers shared across test folders (real Prometheus, …)."""
