"""Analysis over results: segments, tuning decisions, comparisons."""
