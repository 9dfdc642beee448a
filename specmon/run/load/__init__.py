"""The load run: one generator per server (`LoadRunner`), or worker processes (`WorkerPool`)."""
