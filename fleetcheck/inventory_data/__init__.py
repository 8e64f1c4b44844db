"""The fleet as the inventory declares it, below the node kinds: hosts, targets and their
options (`model.py`), the readers of a YAML document and of the inventory's values, the
listings of Proxmox and OCI guests, the words of `--limit` patterns and node ranges, and the
Proxmox API client.

The node kinds (`fleetcheck/kinds/`) and the transports import these; the inventory stage
(`fleetcheck/inventory/`: load, `--limit`, discovery, the graph) imports the kinds. This
package imports neither, and its `__init__` nothing, so importing one of its modules never
starts the inventory stage (whose `__init__` re-exports the stage's whole API).
"""
