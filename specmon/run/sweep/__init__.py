"""The k sweep: settings, the runner (one arm after another), its control and the driver."""
