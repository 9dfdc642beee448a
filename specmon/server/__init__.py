"""The servers' own view: /metrics scraping, counter deltas, the live verdict."""
