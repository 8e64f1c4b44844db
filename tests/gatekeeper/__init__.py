"""The forced-command gatekeeper and host-setup tests (other suites reuse their helpers)."""
