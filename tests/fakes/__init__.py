"""Stand-ins for what cannot exist in a test run (a Proxmox host and its API)."""
