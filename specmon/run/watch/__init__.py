"""`specmon watch`: the /metrics runner and its driver."""
