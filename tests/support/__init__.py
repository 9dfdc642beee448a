"""What the tests share: fixtures data, fake servers, oracles and screen drivers, imported as
`support.<module>` (pytest puts tests/ on sys.path, as for `peer` and `realvllm`)."""
