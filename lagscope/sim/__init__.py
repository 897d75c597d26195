"""Scenario simulator: drives real producers and consumer groups, records ground truth."""
