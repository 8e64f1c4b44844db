"""fleetcheck: will Triton really run on the GPU on every node of the fleet, and if not, why."""

__version__ = "0.1.0"
