"""Where results come from: the load generator (live runs), replays, raw captures."""
