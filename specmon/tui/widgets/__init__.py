"""The monitor's widgets: each reads plain data handed to it by the app's refresh tick."""
